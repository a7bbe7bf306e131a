"""What the data-parallel-informed baselines (Gavel, Sia, LAS) share: their view of a job.

**Shared treatment** (the Crius artifact's, see ``docs/baselines.md``): the baselines *decide*
from data-parallel information — the speed of a job on (GPU type, GPU count) is its
data-parallel replica's samples/s at the fastest layout, and a job whose replica fits nowhere
they may place it is rejected with a reason — but they *run* "+AP": the Cell they start uses the
best plan of the chosen layout and pays the unpruned tuning overhead (``tuning="full"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import Layout, PlanConstraints
from crius_gym.perf.tuner import Tuner, layouts_for
from crius_gym.policies.placement import requested_allocation
from crius_gym.sim.actions import TuningMode
from crius_gym.sim.allocator import Allocator
from crius_gym.sim.records import JobView
from crius_gym.sim.snapshot import Snapshot
from crius_gym.workload.job import Job

#: The plan restriction of data parallelism: one stage, no tensor parallelism.
DATA_PARALLEL = PlanConstraints(pipeline=1, tensor=1)

#: What a planner compares to decide whether anything happened since its last decision: trace
#: arrivals still to come and free GPUs per type.  Every arrival changes the first, every
#: completion frees GPUs; nothing else changes a job set or an allocation between decisions.
StateKey = tuple[int, tuple[int, ...]]

#: A configuration: (GPU type, GPU count).
Config = tuple[str, int]


@dataclass(frozen=True)
class Launch:
    """How a baseline starts a job on a layout: the Cell, its plan restriction and tuning mode."""

    cell: Cell
    constraints: PlanConstraints | None
    tuning: TuningMode


def dp_layouts(tuner: Tuner, job: Job, gpu_type: str, num_gpus: int) -> list[tuple[Layout, float]]:
    """Layouts of ``num_gpus`` GPUs of a type where the data-parallel replica fits in memory.

    Returns:
        ``(layout, samples/s of data parallelism there)``, fewest nodes first (empty: the type
        has too few GPUs or the replica does not fit).
    """
    group = tuner.cluster.group(gpu_type)
    if num_gpus > group.num_gpus:
        return []
    out = []
    for lay in layouts_for(group, num_gpus):
        est = tuner.best_in_layout(job.model, job.global_batch, gpu_type, lay, DATA_PARALLEL)
        if est is not None:
            out.append((lay, job.global_batch / est.iter_time_s))
    return out


def dp_throughput(tuner: Tuner, job: Job, gpu_type: str, num_gpus: int) -> float | None:
    """Samples/s of data parallelism on ``num_gpus`` GPUs of a type at its fastest layout.

    None when the data-parallel replica fits in no layout (the baselines' view of "cannot run").
    """
    speeds = [thr for _, thr in dp_layouts(tuner, job, gpu_type, num_gpus)]
    return max(speeds) if speeds else None


def launches(
    tuner: Tuner, job: Job, gpu_type: str, num_gpus: int, auto_parallel: bool
) -> list[Launch]:
    """Ways to start a job on ``num_gpus`` GPUs of a type, preferred (fewest nodes) first.

    Only layouts where the data-parallel replica fits are offered, since that is what the
    baselines decide on.  With ``auto_parallel`` the Cell takes the stage count of the layout's
    best plan and pays the unpruned search ("+AP"); otherwise it runs data parallelism untuned.
    """
    out = []
    for lay, _ in dp_layouts(tuner, job, gpu_type, num_gpus):
        if not auto_parallel:
            out.append(Launch(Cell(gpu_type, lay, 1), DATA_PARALLEL, "none"))
            continue
        best = tuner.best_in_layout(job.model, job.global_batch, gpu_type, lay)
        if best is not None:  # the unconstrained search always finds at least the DP plan
            out.append(Launch(Cell(gpu_type, lay, best.plan.pipeline), None, "full"))
    return out


def first_fitting(alloc: Allocator, options: Sequence[Launch]) -> Launch | None:
    """The first launch whose Cell fits in ``alloc`` now."""
    for launch in options:
        if alloc.free_gpus(launch.cell.gpu_type) >= launch.cell.num_gpus and alloc.can_place(
            launch.cell
        ):
            return launch
    return None


def state_key(snapshot: Snapshot, alloc: Allocator | None = None) -> StateKey:
    """The snapshot's :data:`StateKey`, with free GPUs from ``alloc`` when given (a plan)."""
    source = alloc if alloc is not None else snapshot
    free = tuple(source.free_gpus(t) for t in snapshot.cluster.gpu_types)
    return snapshot.future_arrivals, free


def held_cell(view: JobView) -> Cell | None:
    """The Cell a job runs on, None while it waits.

    A job's record keeps its last Cell after a preemption (for the results), so whether it holds
    GPUs is read from its placement.
    """
    return view.cell if view.placement is not None else None


def requested_gpu_count(job: Job, snapshot: Snapshot) -> int:
    """GPUs the job asked for (else the count of its best Cell on its requested type, else 1)."""
    if job.requested_gpus is not None:
        return job.requested_gpus
    req = requested_allocation(job, snapshot)
    return req[1] if req is not None else 1
