"""The guide's run of an episode's trace, as a reward baseline (``reward_baseline: guide``).

The JCT reward of an interval is −(jobs in system) × Δt / scale. Subtracting the same quantity
of the guide's own run on the same trace, over the same simulated interval, leaves the
difference the agent's decisions make: the arrivals, which both runs share, cancel. It is a
potential-based shaping term (a function of the trace and the time only), so it changes no
policy's ranking: over a whole episode the sum is −(ΣJCT − ΣJCT_guide) / scale.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from itertools import accumulate

from crius_gym.sim.metrics import JobResult


class JobsInSystemIntegral:
    """``∫_0^t (jobs in system) dτ`` of a finished run, for any ``t``, in O(log n).

    A job is in the system from its arrival to its finish; rejected jobs never are (the
    simulator rejects at arrival); a job that never finished stays in the system.

    Args:
        jobs: the run's per-job results.
    """

    def __init__(self, jobs: Sequence[JobResult]) -> None:
        arrivals = sorted(j.arrival_s for j in jobs if j.status != "rejected")
        finishes = sorted(j.finish_s for j in jobs if j.status == "finished")
        self._a = arrivals
        self._f = finishes
        self._sa = [0.0, *accumulate(arrivals)]
        self._sf = [0.0, *accumulate(finishes)]

    def __call__(self, t: float) -> float:
        """The integral up to ``t`` seconds (job-seconds)."""
        na = bisect.bisect_left(self._a, t)
        nf = bisect.bisect_left(self._f, t)
        return (na * t - self._sa[na]) - (nf * t - self._sf[nf])

    @property
    def total(self) -> float:
        """The integral over the whole run: Σ over finished jobs of their JCT (+ open jobs)."""
        if not self._a:
            return 0.0
        return self(max(self._a[-1], self._f[-1] if self._f else 0.0))
