"""The Crius scheduling heuristic (arXiv 2403.16125, "Arena"), rebuilt as a policy.

The algorithm follows the authors' ``scheduler.py`` (sjtu-epcc/arena, branch ``ae-eurosys``); the
mapping and every deliberate difference are in ``docs/crius_heuristic.md``.  One decision runs
three passes over a private copy of the allocation (:meth:`Snapshot.scratch`), so every action
it returns is valid in order:

1. **Blockers** — waiting jobs walked in FIFO order; one that fits on idle GPUs plus the GPUs of
   the opportunistic jobs that arrived after it preempts the fewest of them (latest arrivals
   first) and starts.
2. **Admission** — waiting jobs in FIFO order start on their quota (requested GPU type and count)
   at the layout with the fewest nodes that fits, else a relaxed layout; a job that still does
   not fit gets a bounded breadth-first **downgrade search** (shrink a running job to half its
   GPUs, or move one to another GPU type, or shrink / move the new job) and the feasible plan
   with the largest summed estimated throughput.  A job started while an earlier one waits is
   *opportunistic* (backfilling).
3. **Upgrade** — on decisions without arrivals, up to ``max_upgrade_moves`` single best moves:
   grow a running job to twice its GPUs or move it to another GPU type at the same count, when
   the summed estimated throughput rises and the job's pause is paid back by its remaining work.

Opportunistic jobs and blockers are derived from the snapshot (an active job is opportunistic
while a job that arrived before it is waiting), so the same snapshot yields the same actions.
Speeds are the tuner's estimates in samples/s; a Cell's stage count is the best one for its
layout.  Ablations: ``crius-ns`` (no GPU-count scaling), ``crius-nh`` (no GPU-type change),
``crius-no`` (no opportunistic execution), ``crius-dp`` (data-parallel information only).
"""

from crius_gym.policies.crius.options import (
    CriusOptions,
    blocker_jobs,
    opportunistic_jobs,
)
from crius_gym.policies.crius.policy import CriusPolicy
from crius_gym.policies.crius.speeds import FitMemo
from crius_gym.policies.data_parallel import DATA_PARALLEL

__all__ = [
    "DATA_PARALLEL",
    "CriusOptions",
    "CriusPolicy",
    "FitMemo",
    "blocker_jobs",
    "opportunistic_jobs",
]
