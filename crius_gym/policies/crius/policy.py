"""The Crius policy: three passes over a private copy of the allocation.

Also its registered variants (the ablations and the artifact's settings).

Part of :mod:`crius_gym.policies.crius` (its docstring has the algorithm).
"""

from __future__ import annotations

from typing import Any

from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.tuner import Tuner
from crius_gym.policies.crius.admission import admit_waiting
from crius_gym.policies.crius.blockers import restart_blockers
from crius_gym.policies.crius.ledger import Carry, Ledger
from crius_gym.policies.crius.options import CriusOptions
from crius_gym.policies.crius.speeds import SpeedTable
from crius_gym.policies.crius.upgrades import upgrade_pass
from crius_gym.policies.registry import register
from crius_gym.sim.actions import Action
from crius_gym.sim.policy import PolicyContext
from crius_gym.sim.snapshot import Snapshot

# The policy


def _has_arrivals(snapshot: Snapshot) -> bool:
    """Whether a job arrived at this instant (it is waiting and was never started)."""
    return any(
        v.job.arrival_s == snapshot.now_s and v.first_start_s is None for v in snapshot.waiting
    )


class CriusPolicy:
    """The rule-based Crius scheduler (see the module docstring and ``docs/crius_heuristic.md``).

    Every start and reconfiguration pays the pruned (Cell-guided) tuning overhead.

    Args:
        options: switches and bounds (default: everything on, the authors' bounds).
        name: registry name used in reports.
    """

    tick_interval_s: float | None = None

    def __init__(self, options: CriusOptions | None = None, name: str = "crius") -> None:
        self.options = options or CriusOptions()
        self.name = name
        self._speeds: SpeedTable | None = None
        self._tables: dict[int, SpeedTable] = {}
        # When each job the policy (re)started resumes iterating, simulated seconds.
        self._resume_at: dict[int, float] = {}
        self._carry = Carry()

    def reset(self, context: PolicyContext) -> None:
        """Start a new run: fresh bookkeeping (speeds stay cached per tuner: they are pure)."""
        self._speeds = self._speed_table(context.cluster, context.tuner)
        self._resume_at = {}
        self._carry = Carry()

    def _speed_table(self, cluster: ClusterSpec, tuner: Tuner) -> SpeedTable:
        # One table per tuner, kept across runs: its entries are a function of the tuner's
        # (deterministic) estimates, and an env that switches clusters would rebuild it often.
        key = id(tuner)
        hit = self._tables.get(key)
        if hit is None or hit.tuner is not tuner or hit.cluster is not cluster:
            opts = self.options
            hit = SpeedTable(cluster, tuner, opts.data_parallel_only, opts.tuner_cells)
            self._tables[key] = hit
        return hit

    def decide(self, snapshot: Snapshot) -> list[Action]:
        """Blockers first, then admission in FIFO order, then upgrades if nothing arrived."""
        speeds = self._speeds
        if speeds is None or speeds.tuner is not snapshot.tuner:
            speeds = self._speeds = self._speed_table(snapshot.cluster, snapshot.tuner)
        ledger = Ledger(snapshot, speeds, self._resume_at, self._carry)
        if self.options.opportunistic:
            restart_blockers(ledger, self.options)
        admit_waiting(ledger, self.options)
        if self.options.upgrade_on_arrivals or not _has_arrivals(snapshot):
            upgrade_pass(ledger, self.options)
        return ledger.actions


def _factory(name: str, **preset: Any) -> Any:
    def make(**overrides: Any) -> CriusPolicy:
        return CriusPolicy(CriusOptions(**{**preset, **overrides}), name=name)

    make.__doc__ = f"Build the ``{name}`` policy (keyword arguments override CriusOptions)."
    return make


register("crius")(_factory("crius"))
register("crius-ns")(_factory("crius-ns", scaling=False))
register("crius-nh")(_factory("crius-nh", type_change=False))
register("crius-no")(_factory("crius-no", opportunistic=False))
register("crius-dp")(_factory("crius-dp", data_parallel_only=True))
# The Arena artifact's upgrade pass: after every round with arrivals too
# (scheduler.py::_fit_new_jobs), on any positive summed-throughput gain with no pay-back test
# (_job_upgrade_search: ``if max_gain > 0``).
# It prices every profiled configuration, pruned or not (tuner_cells off).
register("crius-artifact")(
    _factory("crius-artifact", upgrade_on_arrivals=True, charge_pause=False, tuner_cells=False)
)
