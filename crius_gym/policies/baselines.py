"""Simple baselines: FCFS (as in the Crius paper, and as the Arena artifact runs it) and random."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from crius_gym.perf.cell import Cell
from crius_gym.policies.data_parallel import DATA_PARALLEL
from crius_gym.policies.placement import layouts, requested_allocation
from crius_gym.policies.registry import register
from crius_gym.sim.actions import Action, Reject, Start, TuningMode
from crius_gym.sim.policy import PolicyContext
from crius_gym.sim.snapshot import Snapshot


class FCFS:
    """First come, first served on the requested GPU type and count (the paper's FCFS).

    Jobs start in arrival order: when the head of the queue does not fit, nothing behind it
    starts (with ``per_type_fifo``, nothing behind it *on the same GPU type*). Each job runs on
    exactly the GPU type and count it requested (missing parts of a request come from its best
    Cell), in the layout with the fewest nodes that fits now (only that layout with
    ``best_layout_only``).

    Args:
        auto_parallel: False — data parallelism only (no plan search, no tuning pause; a job
            whose data-parallel replica does not fit in memory is rejected, as DP-based
            baselines cannot run it); True (``fcfs+ap``) — the best plan in the allocation,
            paying the unpruned tuning overhead.
        per_type_fifo: one FIFO queue per requested GPU type, as the Arena artifact's FCFS
            (``baselines/fcfs_sched.py``: a new job waits only behind pending jobs of its own
            type, ``_is_exist_pend_job_same_gpu_type``; the restart trial blocks a type at its
            first failure); False — one global queue.
        best_layout_only: only the layout with the fewest nodes (the artifact's best locality;
            relaxed layouts are its ``fcfs-r``).
        name: report name.
    """

    tick_interval_s: float | None = None

    def __init__(
        self,
        auto_parallel: bool = False,
        per_type_fifo: bool = False,
        best_layout_only: bool = False,
        name: str | None = None,
    ) -> None:
        self.auto_parallel = auto_parallel
        self.per_type_fifo = per_type_fifo
        self.best_layout_only = best_layout_only
        self.name = name or ("fcfs+ap" if auto_parallel else "fcfs")

    def reset(self, context: PolicyContext) -> None:
        """Nothing to reset."""

    def _plan(self, snapshot: Snapshot, job_index: int) -> tuple[list[Cell], str | None]:
        job = snapshot.job(job_index).job
        req = requested_allocation(job, snapshot)
        if req is None:
            return [], "requested GPU type absent or too small"
        gpu_type, n = req
        cells = []
        allowed = layouts(snapshot.cluster, gpu_type, n)
        for lay in allowed[:1] if self.best_layout_only else allowed:
            if self.auto_parallel:
                est = snapshot.tuner.best_in_layout(job.model, job.global_batch, gpu_type, lay)
                if est is not None:
                    cells.append(Cell(gpu_type, lay, est.plan.pipeline))
            elif snapshot.estimated_iter_time_s(job, Cell(gpu_type, lay, 1), DATA_PARALLEL):
                cells.append(Cell(gpu_type, lay, 1))
        if not cells:
            kind = "no plan" if self.auto_parallel else "no data-parallel plan"
            return [], f"{kind} fits in memory on the requested GPUs"
        return cells, None

    def decide(self, snapshot: Snapshot) -> Sequence[Action]:
        """Start waiting jobs in arrival order until the head (of their type) does not fit."""
        alloc = snapshot.scratch()
        actions: list[Action] = []
        constraints = None if self.auto_parallel else DATA_PARALLEL
        tuning: TuningMode = "full" if self.auto_parallel else "none"
        blocked: set[str] = set()
        for view in snapshot.waiting:
            cells, reason = self._plan(snapshot, view.index)
            if reason is not None:
                actions.append(Reject(view.job.job_id, reason))
                continue
            gpu_type = cells[0].gpu_type
            if gpu_type in blocked:
                continue
            chosen = next((c for c in cells if alloc.can_place(c)), None)
            if chosen is None:
                if not self.per_type_fifo:
                    break  # strict FCFS: the head blocks the queue
                blocked.add(gpu_type)
                if len(blocked) == len(snapshot.cluster.gpu_types):
                    break
                continue
            alloc.place(chosen)
            actions.append(Start(view.job.job_id, chosen, constraints, tuning))
        return actions


@register("fcfs")
def _fcfs(**options: bool) -> FCFS:
    return FCFS(**{"auto_parallel": False, **options}, name="fcfs")


@register("fcfs+ap")
def _fcfs_ap(**options: bool) -> FCFS:
    return FCFS(**{"auto_parallel": True, **options}, name="fcfs+ap")


@register("fcfs-artifact")
def _fcfs_artifact(**options: bool) -> FCFS:
    """The Arena artifact's FCFS (``--enable_alpa``).

    Per-type FIFO queues, the tuned optimal plan with the unpruned tuning charge, best locality
    only, and no data-parallel memory rejection (the artifact queries with ``force_opt``, which
    skips that check).
    """
    preset = {"auto_parallel": True, "per_type_fifo": True, "best_layout_only": True}
    return FCFS(**{**preset, **options}, name="fcfs-artifact")


@register("random")
class RandomPolicy:
    """A floor: waiting jobs in random order, each on a random tuner Cell that fits now."""

    name = "random"
    tick_interval_s: float | None = None

    def __init__(self) -> None:
        self._rng = np.random.default_rng(0)

    def reset(self, context: PolicyContext) -> None:
        """Take the run's random generator."""
        self._rng = context.rng

    def decide(self, snapshot: Snapshot) -> Sequence[Action]:
        """Start as many waiting jobs as fit, in random order on random fitting Cells."""
        alloc = snapshot.scratch()
        actions: list[Action] = []
        waiting = list(snapshot.waiting)
        for k in self._rng.permutation(len(waiting)):
            job = waiting[int(k)].job
            fitting = [
                c.cell for c in snapshot.candidates(job).candidates if alloc.can_place(c.cell)
            ]
            if not fitting:
                continue
            cell = fitting[int(self._rng.integers(len(fitting)))]
            alloc.place(cell)
            actions.append(Start(job.job_id, cell, None, "pruned"))
        return actions
