"""The decision being planned: the private allocation and the running jobs' records.

Also their victim rankings, and what carries over to the next decision.

Part of :mod:`crius_gym.policies.crius` (its docstring has the algorithm).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field, replace

import numpy as np

from crius_gym.perf.cell import Cell
from crius_gym.policies.crius.speeds import FitMemo, Option, SpeedTable
from crius_gym.sim.actions import Action, Preempt, Reconfigure, Reject, Start
from crius_gym.sim.allocator import Placement
from crius_gym.sim.records import JobStatus, JobView
from crius_gym.sim.snapshot import Snapshot
from crius_gym.workload.job import Job

# The decision being planned


@dataclass(slots=True)
class Held:
    """A job holding GPUs in the plan."""

    index: int
    job: Job
    cell: Cell
    placement: Placement
    num_gpus: int
    throughput: float  # estimated samples/s on its Cell
    movable: bool  # False once started or changed in this decision (one change per decision)
    view: JobView | None  # None for jobs started in this decision
    iter_time_s: float = 0.0  # the estimate its throughput came from (running jobs)
    # Its bounds as a downgrade-search victim (:func:`_victim_bounds`), computed when first
    # needed; a record's Cell and speed never change (a change makes a new record, and
    # ``replace`` does not copy this field).
    victim_bounds: VictimBounds | None = field(default=None, init=False, repr=False, compare=False)
    # Best-case upgrade gains by target type (:meth:`upgrade_gains`), cached the same way.
    _upgrade_gains: dict[str, float] | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def upgrade_gains(self, speeds: SpeedTable) -> dict[str, float]:
        """Best-case upgrade gains by target type, samples/s.

        Its own type's entry grows it to twice its GPUs there; every other type's entry moves
        it there at the same count.
        """
        hit = self._upgrade_gains
        if hit is None:
            own, n = self.cell.gpu_type, self.num_gpus
            hit = self._upgrade_gains = {
                u: speeds.best_throughput(self.job, u, 2 * n if u == own else n) - self.throughput
                for u in speeds.gpu_types
            }
        return hit


class _TypeJobs:
    """The movable jobs of one GPU type in arrival order, with suffix sums of their GPUs.

    The sums are built on the first :meth:`later_than` (most decisions only read ``jobs``).
    """

    def __init__(self, jobs: list[Held]) -> None:
        self.jobs = jobs
        self._indices: list[int] | None = None
        self._gpus_after: list[int] = []

    def later_than(self, index: int) -> tuple[list[Held], int]:
        """Jobs that arrived after trace index ``index`` and the GPUs they hold."""
        jobs = self.jobs
        if self._indices is None:
            self._indices = [h.index for h in jobs]
            after = self._gpus_after = [0] * (len(jobs) + 1)
            for k in range(len(jobs) - 1, -1, -1):
                after[k] = after[k + 1] + jobs[k].num_gpus
        k = bisect.bisect_right(self._indices, index)
        return jobs[k:], self._gpus_after[k]


class Carry:
    """What one decision's bookkeeping hands to the next, for less work and the same decisions.

    Both are pure functions of jobs that did not change in between.  ``held`` keeps each
    running job's :class:`Held` while its record, Cell, placement and estimate stay;
    ``victims`` keeps the last victim ranking of each GPU type while its movable jobs are the
    very same objects.
    """

    def __init__(self) -> None:
        self._held: dict[int, Held] = {}
        self._victims: dict[str, tuple[list[Held], _Victims]] = {}

    # A copy (an env's headless rollout copy, a pickled env) starts empty: the carry is only a
    # shortcut, and copying it would copy the job records it points to.
    def __deepcopy__(self, memo: dict[int, object]) -> Carry:
        return Carry()

    def __reduce__(self) -> tuple[type[Carry], tuple[()]]:
        return Carry, ()

    def held(self, active: tuple[JobView, ...], by_type: dict[str, list[Held]]) -> dict[int, Held]:
        """Running jobs as movable :class:`Held` by trace index (in arrival order).

        Each is also appended to its GPU type's list in ``by_type`` (one pass over the jobs).
        """
        last, out = self._held, {}
        get = last.get
        for v in active:
            i = v.index
            h = get(i)
            if (
                h is None
                or h.view is not v
                or h.cell is not v.cell
                or h.placement is not v.placement
                or h.iter_time_s != v.estimated_iter_time_s
            ):
                assert v.cell is not None and v.placement is not None
                thr = v.job.global_batch / v.estimated_iter_time_s
                h = Held(
                    v.index,
                    v.job,
                    v.cell,
                    v.placement,
                    v.placement.num_gpus,
                    thr,
                    True,
                    v,
                    v.estimated_iter_time_s,
                )
            out[i] = h
            by_type[h.cell.gpu_type].append(h)
        self._held = out
        return dict(out)

    def victims(self, speeds: SpeedTable, gpu_type: str, jobs: list[Held]) -> _Victims:
        """The victim ranking of a type's movable jobs, reused while they are the same."""
        hit = self._victims.get(gpu_type)
        if (
            hit is not None
            and len(hit[0]) == len(jobs)
            and all(a is b for a, b in zip(hit[0], jobs, strict=True))
        ):
            return hit[1]
        victims = _Victims(speeds, gpu_type, jobs)
        self._victims[gpu_type] = (jobs, victims)
        return victims


class Ledger:
    """A scratch allocation, the jobs holding GPUs in it and the actions that lead to it.

    Every change goes through :meth:`start`, :meth:`reconfigure`, :meth:`preempt` or
    :meth:`reject`, which update the scratch exactly as the simulator will when it applies the
    recorded action, so the action list stays valid in order.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        speeds: SpeedTable,
        resume_at: dict[int, float],
        carry: Carry,
    ) -> None:
        self.snapshot = snapshot
        self.speeds = speeds
        self.alloc = snapshot.scratch()
        self._carry = carry
        # Movable jobs per type in arrival order, kept as jobs change (``active`` is in order).
        self._movable: dict[str, list[Held]] = {t: [] for t in speeds.gpu_types}
        self.held = self._carry.held(snapshot.active, self._movable)
        self.waiting = list(snapshot.waiting.indices)
        # Jobs preempted in this decision: one change per job per decision, so they wait for
        # the next one (restarting a victim elsewhere at once would be a second change).
        self.preempted: set[int] = set()
        self.actions: list[Action] = []
        self._resume_at = resume_at
        self._by_type: dict[str, _TypeJobs] = {}
        self._fit: FitMemo | None = None
        self._victims: dict[str, _Victims] = {}

    @property
    def fit(self) -> FitMemo:
        """Fit checks on the current scratch allocation."""
        if self._fit is None:
            self._fit = FitMemo(self.alloc)
        return self._fit

    def _changed(self, left: Held | None) -> None:
        """The allocation changed; ``left`` (if any) is no longer movable."""
        self._fit = None
        if left is not None:
            t = left.cell.gpu_type
            jobs = self._movable[t]
            del jobs[next(k for k, h in enumerate(jobs) if h is left)]
            self._by_type.pop(t, None)
            self._victims.pop(t, None)

    def victims(self, gpu_type: str) -> _Victims:
        """The movable jobs of a type ranked as downgrade-search victims."""
        hit = self._victims.get(gpu_type)
        if hit is None:
            hit = self._victims[gpu_type] = self._carry.victims(
                self.speeds, gpu_type, self.on_type(gpu_type).jobs
            )
        return hit

    def on_type(self, gpu_type: str) -> _TypeJobs:
        """Jobs on a GPU type that may still change in this decision."""
        hit = self._by_type.get(gpu_type)
        if hit is None:
            hit = self._by_type[gpu_type] = _TypeJobs(list(self._movable.get(gpu_type, ())))
        return hit

    def _pause_s(self, num_gpus: int, has_progress: bool) -> float:
        restore = self.snapshot.restore_s if has_progress else 0.0
        return self.snapshot.tuning_overhead_s(num_gpus, "pruned") + restore

    def start(self, index: int, option: Option) -> None:
        """Start a waiting job on a Cell."""
        view = self.snapshot.job(index)
        placement = self.alloc.place(option.cell)
        assert placement is not None, f"planned start of {view.job.job_id} does not fit"
        self.waiting.remove(index)
        self.held[index] = Held(
            index,
            view.job,
            option.cell,
            placement,
            placement.num_gpus,
            option.throughput,
            False,
            None,
        )
        self._changed(None)  # a job started now is not movable
        self.actions.append(Start(view.job.job_id, option.cell, self.speeds.constraints, "pruned"))
        pause = self._pause_s(option.cell.num_gpus, view.progress_iters > 0)
        self._resume_at[index] = self.snapshot.now_s + pause

    def reconfigure(self, index: int, option: Option) -> None:
        """Move a held job to another Cell."""
        h = self.held[index]
        self.alloc.release(h.placement)
        placement = self.alloc.place(option.cell)
        assert placement is not None, f"planned reconfigure of {h.job.job_id} does not fit"
        self.held[index] = replace(
            h,
            cell=option.cell,
            placement=placement,
            num_gpus=placement.num_gpus,
            throughput=option.throughput,
            movable=False,
        )
        self._changed(h)  # it is no longer movable
        self.actions.append(
            Reconfigure(h.job.job_id, option.cell, self.speeds.constraints, "pruned")
        )
        has_progress = h.view is not None and (
            h.view.progress_iters > 0 or h.view.status is JobStatus.RUNNING
        )
        pause = self._pause_s(option.cell.num_gpus, has_progress)
        self._resume_at[index] = self.snapshot.now_s + pause

    def preempt(self, index: int) -> None:
        """Return a held job to the queue (it keeps its arrival position)."""
        h = self.held.pop(index)
        self.alloc.release(h.placement)
        bisect.insort(self.waiting, index)
        self.preempted.add(index)
        self._changed(h if h.movable else None)
        self.actions.append(Preempt(h.job.job_id))

    def reject(self, index: int, reason: str) -> None:
        """Give up on a waiting job."""
        self.waiting.remove(index)
        self.actions.append(Reject(self.snapshot.job(index).job.job_id, reason))

    def remaining_iters(self, h: Held) -> float:
        """Iterations left now: the last exact progress plus what ran since the job resumed."""
        view = h.view
        if view is None:
            return float(h.job.iterations)
        done = view.progress_iters
        anchor = self._resume_at.get(h.index)
        if view.status is JobStatus.RUNNING and anchor is not None and view.iter_time_s > 0:
            # The simulator settles progress when a pause ends; the policy remembers when that
            # was for the jobs it (re)started, and a running job uses its observed speed since.
            done += max(0.0, self.snapshot.now_s - anchor) / view.iter_time_s
        return max(0.0, h.job.iterations - done)


# A move target of a running job: another type with Cells at its count, the best-case change
# there (samples/s) and those Cells.
_Target = tuple[str, float, tuple[Option, ...]]


@dataclass(frozen=True)
class VictimBounds:
    """A running job as a downgrade-search victim: what each step could give, best case.

    Attributes:
        shrink_loss: best-case loss when halved, samples/s (None: no Cell at half the count).
        half: its Cells at half the count on its type.
        move_change: best-case change when moved to another type at the same count, samples/s
            (None: no Cell there).
        targets: those types in cluster order, each with its best-case change and Cells.
    """

    shrink_loss: float | None
    half: tuple[Option, ...]
    move_change: float | None
    targets: tuple[_Target, ...]


def _victim_bounds(speeds: SpeedTable, h: Held) -> VictimBounds:
    """A running job's bounds as a victim."""
    t, n = h.cell.gpu_type, h.num_gpus
    loss = None
    half = speeds.options(h.job, t, n // 2) if n >= 2 else ()
    if half:
        loss = h.throughput - speeds.best_throughput(h.job, t, n // 2)
    targets = []
    for u in speeds.gpu_types:
        options = speeds.options(h.job, u, n) if u != t else ()
        if options:
            targets.append((u, speeds.best_throughput(h.job, u, n) - h.throughput, options))
    change = max((c for _, c, _ in targets), default=None)
    return VictimBounds(loss, half, change, tuple(targets))


class _Victims:
    """Running jobs of one GPU type as victims of the downgrade search, pre-ranked once.

    ``shrink`` holds, per GPU count, the jobs whose half count has a feasible Cell, by their
    best-case loss (samples/s) then arrival; ``move`` holds the jobs with a feasible Cell on
    another type at the same count, by count (descending), best-case gain, arrival, each with
    its target types and their best-case changes.  Exact
    checks on a search state then stop as soon as no later entry can beat the best found.
    """

    def __init__(self, speeds: SpeedTable, gpu_type: str, jobs: list[Held]) -> None:
        self.gpu_type = gpu_type
        self.others = [t for t in speeds.gpu_types if t != gpu_type]
        shrink: dict[int, list[tuple[float, int, Held]]] = {}
        move: list[tuple[int, float, int, Held, tuple[_Target, ...]]] = []
        for h in jobs:
            bounds = h.victim_bounds
            if bounds is None:
                bounds = h.victim_bounds = _victim_bounds(speeds, h)
            if bounds.shrink_loss is not None:
                shrink.setdefault(h.num_gpus, []).append((bounds.shrink_loss, h.index, h))
            if bounds.move_change is not None:
                move.append((-h.num_gpus, -bounds.move_change, h.index, h, bounds.targets))
        # Bounds over every entry, for skipping last-step search states that cannot win.
        self.least_shrink_loss = min((e[0] for v in shrink.values() for e in v), default=np.inf)
        self.best_move_change = max((-e[1] for e in move), default=-np.inf)
        self.shrink_counts = sorted(shrink, reverse=True)
        # Trace indices are unique, so plain tuple order is (bound, index) order.
        self._shrink = {n: sorted(v) for n, v in shrink.items()}
        self._pools: dict[int, list[tuple[float, int, Held]]] = {}
        move.sort()
        self.move = move
        self._move_keys = [e[0] for e in move]
        # Where each entry's count ends in ``move``: within a count, entries are ranked by
        # best-case gain, so once one cannot beat the best move found, neither can the rest.
        self.count_end = [bisect.bisect_right(self._move_keys, key) for key in self._move_keys]

    def shrink_pool(self, changed: frozenset[int]) -> list[tuple[float, int, Held]]:
        """Jobs with at least half the largest GPU count among the unchanged ones."""
        for n in self.shrink_counts:
            if any(h.index not in changed for _, _, h in self._shrink[n]):
                pool = self._pools.get(n)
                if pool is None:
                    pool = self._shrink[n] + self._shrink.get(n // 2, [])
                    pool = self._pools[n] = sorted(pool)
                return pool
        return []

    def movable_from(self, max_free: int) -> int:
        """Position in ``move`` of the first entry of a job holding at most ``max_free`` GPUs."""
        return bisect.bisect_left(self._move_keys, -max_free)
