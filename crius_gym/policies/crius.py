"""The Crius scheduling heuristic (arXiv 2403.16125, "Arena"), rebuilt as a policy.

The algorithm follows the authors' ``scheduler.py`` as summarised in the Crius note §4; the
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

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from crius_gym.errors import ConfigError
from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import Layout, PlanConstraints
from crius_gym.perf.tuner import Tuner
from crius_gym.policies.placement import layouts
from crius_gym.policies.registry import register
from crius_gym.sim.actions import Action, Preempt, Reconfigure, Reject, Start
from crius_gym.sim.allocator import Allocator, Placement, released_node_gain
from crius_gym.sim.policy import PolicyContext
from crius_gym.sim.records import JobStatus, JobView
from crius_gym.sim.snapshot import Snapshot
from crius_gym.workload.job import Job

#: Plan restriction of the ``crius-dp`` ablation: data parallelism only.
DATA_PARALLEL = PlanConstraints(pipeline=1, tensor=1)

# Two plans whose summed throughputs differ by less than this (samples/s) are a tie, so the
# plan found first (fewer steps, earlier in the deterministic search order) wins.
_TIE_SAMPLES_S = 1e-9
# Bounds that skip downgrade-search states must clear the best plan by this much more, far above
# floating-point rounding of sums of throughputs, so that skipping never changes the plan.
_BOUND_SLACK_SAMPLES_S = 1e-6


@dataclass(frozen=True)
class CriusOptions:
    """Switches and bounds of the Crius heuristic.

    Attributes:
        scaling: change GPU counts (shrink in the downgrade search, grow in the upgrade pass);
            off = ``crius-ns``.
        type_change: move jobs to another GPU type (HTC); off = ``crius-nh``.
        opportunistic: backfill later jobs past a blocked one and preempt them for it; off =
            ``crius-no`` (strict FIFO).
        data_parallel_only: decide from data-parallel speeds and run data-parallel Cells (one
            stage, no tensor parallelism); on = ``crius-dp``.
        tuner_cells: use only the tuner's pruned Cells (its candidate list for the job): a Cell
            the tuner dropped as dominated (more GPUs, not ``dominance_threshold`` faster than a
            smaller Cell of its type) is never a start, grow or move target, and a request that
            only such a Cell could serve starts on the smaller Cell that dominates it. Off:
            every feasible uniform layout of a (type, count), as the authors' scheduler, which
            prices any profiled configuration (``crius-artifact``). Ignored by ``crius-dp``.
        search_depth: downgrade-search steps while at most ``busy_threshold_jobs`` jobs hold
            GPUs (authors' simulator: 3).
        search_depth_busy: steps beyond that threshold (authors: 2).
        busy_threshold_jobs: active-job count above which ``search_depth_busy`` applies.
        max_searches: downgrade searches per decision (the rest of the queue is only tried on
            idle GPUs); bounds the decision time.
        max_search_nodes: search states expanded per downgrade search.
        max_blocker_trials: blocker placements tried per decision (authors: 100).
        max_upgrade_moves: upgrade moves per decision (authors: 10).
        upgrade_on_arrivals: also run the upgrade pass at decisions with arrivals (the authors
            call it after admitting new jobs too); off = only on departures.
        upgrade_min_gain: an upgrade move must raise the summed throughput by more than this,
            samples/s.
        charge_pause: an upgrade move must also pay back its pause (tuning overhead plus
            checkpoint restore) within the job's remaining work, so nearly finished jobs stay.
        admit_requires_gain: a downgrade plan must raise the summed throughput (the new job's
            speed plus the change of the jobs it shrinks or moves must be positive).
    """

    scaling: bool = True
    type_change: bool = True
    opportunistic: bool = True
    data_parallel_only: bool = False
    tuner_cells: bool = True
    search_depth: int = 3
    search_depth_busy: int = 2
    busy_threshold_jobs: int = 150
    max_searches: int = 4
    max_search_nodes: int = 48
    max_blocker_trials: int = 100
    max_upgrade_moves: int = 10
    upgrade_on_arrivals: bool = False
    upgrade_min_gain: float = 0.0
    charge_pause: bool = True
    admit_requires_gain: bool = True

    def __post_init__(self) -> None:
        for name in (
            "search_depth",
            "search_depth_busy",
            "busy_threshold_jobs",
            "max_searches",
            "max_search_nodes",
            "max_blocker_trials",
            "max_upgrade_moves",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"crius.{name} must be >= 0")
        if self.upgrade_min_gain < 0:
            raise ConfigError("crius.upgrade_min_gain must be >= 0")


# ---------------------------------------------------------------------------------------------
# Public views of the FIFO bookkeeping


def blocker_jobs(snapshot: Snapshot) -> tuple[int, ...]:
    """Trace indices of waiting jobs that a later-arrived active job has overtaken."""
    if not snapshot.active:
        return ()
    last = max(v.index for v in snapshot.active)
    waiting = snapshot.waiting.indices  # sorted: the overtaken prefix, found by bisection
    return tuple(waiting[: bisect.bisect_left(waiting, last)])


def opportunistic_jobs(snapshot: Snapshot) -> tuple[int, ...]:
    """Trace indices of active jobs that hold GPUs while an earlier-arrived job waits."""
    if not snapshot.waiting:
        return ()
    first = snapshot.waiting[0].index
    return tuple(v.index for v in snapshot.active if v.index > first)


# ---------------------------------------------------------------------------------------------
# Speeds: the Cells a job may use on a GPU type and count, with estimated throughput


@dataclass(frozen=True)
class _Option:
    """A Cell a job can run on and its estimated speed (samples/s)."""

    cell: Cell
    throughput: float


class _FitMemo:
    """Fit checks on an allocation that does not change while the memo is used.

    ``can_place`` is memoised per (GPU type, layout); fits after releasing a placement use the
    count of nodes with enough free GPUs, memoised per (GPU type, GPUs per node), corrected on
    the released placement's own nodes only, so no allocator copy is needed.
    """

    def __init__(self, alloc: Allocator) -> None:
        self.alloc = alloc
        self._fits: dict[tuple[str, Layout], bool] = {}
        self._nodes_with: dict[tuple[str, int], int] = {}

    def can_place(self, cell: Cell) -> bool:
        """Whether the Cell fits in the free GPUs (as :meth:`Allocator.can_place`)."""
        key = (cell.gpu_type, cell.layout)
        hit = self._fits.get(key)
        if hit is None:
            hit = self._fits[key] = self.alloc.can_place(cell)
        return hit

    def _count(self, gpu_type: str, gpus_per_node: int) -> int:
        key = (gpu_type, gpus_per_node)
        hit = self._nodes_with.get(key)
        if hit is None:
            free = self.alloc.free_per_node(gpu_type)
            hit = self._nodes_with[key] = int(np.count_nonzero(free >= gpus_per_node))
        return hit

    def fits_released(self, placement: Placement, layout: Layout) -> bool:
        """Whether ``layout`` fits on ``placement``'s type once ``placement`` is released."""
        g = layout.gpus_per_node
        own = self.alloc.free_per_node(placement.gpu_type)[list(placement.nodes)].tolist()
        gained = released_node_gain(own, placement.gpus_per_node, g)  # the allocator's rule
        return self._count(placement.gpu_type, g) + gained >= layout.num_nodes


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def _pow2_ceil(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()


def _pow2_range(top: int) -> list[int]:
    """1, 2, 4, … up to ``top``."""
    return [1 << k for k in range(top.bit_length()) if 1 << k <= top]


class _SpeedTable:
    """Cells and estimated speeds of jobs per (GPU type, GPU count), cached for a run.

    Options of one (type, count) are its feasible uniform layouts, fewest nodes first, each at
    its best stage count (one stage, data parallelism only, for ``crius-dp``); with
    ``tuner_cells``, only those among the tuner's pruned Cells of the job.
    """

    def __init__(
        self,
        cluster: ClusterSpec,
        tuner: Tuner,
        data_parallel_only: bool,
        tuner_cells: bool = False,
    ) -> None:
        self.cluster = cluster
        self.tuner = tuner
        self.data_parallel_only = data_parallel_only
        self.tuner_cells = tuner_cells and not data_parallel_only
        self.constraints = DATA_PARALLEL if data_parallel_only else None
        kind = "data-parallel replica" if data_parallel_only else "Cell"
        self.unfit_reason = f"no {kind} fits in memory on any GPU type"
        self.gpu_types = cluster.gpu_types
        # GPU counts stay powers of two up to the tuner's cap (Crius: 16) and the type's size.
        self.max_gpus = {
            g.gpu_type: _pow2_floor(min(tuner.config.max_gpus, g.num_gpus)) for g in cluster.groups
        }
        self._options: dict[tuple[str, int, str, int], tuple[_Option, ...]] = {}
        self._best: dict[tuple[str, int, str, int], float] = {}
        self._elsewhere: dict[tuple[str, int, str, int], float] = {}
        self._quota: dict[tuple[str, int, str | None, int | None], tuple[str, int] | None] = {}

    def options(self, job: Job, gpu_type: str, num_gpus: int) -> tuple[_Option, ...]:
        """Feasible Cells of ``num_gpus`` GPUs of a type, fewest nodes first."""
        key = (job.model.name, job.global_batch, gpu_type, num_gpus)
        hit = self._options.get(key)
        if hit is not None:
            return hit
        out = []
        if self.tuner_cells:
            if num_gpus <= self.max_gpus.get(gpu_type, 0):
                ranked = self.tuner.tune(job.model, job.global_batch).candidates
                mine = [
                    ce for ce in ranked if ce.cell.gpu_type == gpu_type and ce.num_gpus == num_gpus
                ]
                mine.sort(key=lambda ce: ce.cell.layout.num_nodes)
                out = [_Option(ce.cell, ce.throughput) for ce in mine]
        elif num_gpus <= self.max_gpus.get(gpu_type, 0):
            for lay in layouts(self.cluster, gpu_type, num_gpus):
                est = self.tuner.best_in_layout(
                    job.model, job.global_batch, gpu_type, lay, self.constraints
                )
                if est is not None:
                    stages = 1 if self.data_parallel_only else est.plan.pipeline
                    out.append(
                        _Option(Cell(gpu_type, lay, stages), job.global_batch / est.iter_time_s)
                    )
        self._options[key] = result = tuple(out)
        return result

    def best_throughput(self, job: Job, gpu_type: str, num_gpus: int) -> float:
        """Fastest option's samples/s (0 when none is feasible): an upper bound for any layout."""
        key = (job.model.name, job.global_batch, gpu_type, num_gpus)
        hit = self._best.get(key)
        if hit is None:
            opts = self.options(job, gpu_type, num_gpus)
            hit = self._best[key] = max((o.throughput for o in opts), default=0.0)
        return hit

    def best_elsewhere(self, job: Job, gpu_type: str, num_gpus: int) -> float:
        """Fastest option's samples/s at the same count on any other type (0: none)."""
        key = (job.model.name, job.global_batch, gpu_type, num_gpus)
        hit = self._elsewhere.get(key)
        if hit is None:
            others = [
                self.best_throughput(job, u, num_gpus) for u in self.gpu_types if u != gpu_type
            ]
            hit = self._elsewhere[key] = max(others, default=0.0)
        return hit

    def first_fit(
        self, free: Allocator | _FitMemo, job: Job, gpu_type: str, num_gpus: int
    ) -> _Option | None:
        """The first option (fewest nodes) that fits in the free GPUs."""
        for opt in self.options(job, gpu_type, num_gpus):
            if free.can_place(opt.cell):
                return opt
        return None

    def first_fit_released(
        self, free: _FitMemo, placement: Placement, job: Job, num_gpus: int
    ) -> _Option | None:
        """The first option on ``placement``'s type that fits once ``placement`` is released."""
        for opt in self.options(job, placement.gpu_type, num_gpus):
            if free.fits_released(placement, opt.cell.layout):
                return opt
        return None

    def quota(self, job: Job, snapshot: Snapshot) -> tuple[str, int] | None:
        """The job's starting (GPU type, count); None when no Cell can ever hold it.

        The request, with missing parts from the tuner's best Cell, the count rounded to a power
        of two within the type.  When the request admits no feasible Cell (e.g. too little memory
        per GPU), the smallest feasible larger count on the requested type is taken, else the
        smallest feasible count on any type (the fastest type at that count).
        """
        key = (job.model.name, job.global_batch, job.requested_gpu_type, job.requested_gpus)
        if key in self._quota:
            return self._quota[key]
        result = self._quota_uncached(job, snapshot)
        self._quota[key] = result
        return result

    def _quota_uncached(self, job: Job, snapshot: Snapshot) -> tuple[str, int] | None:
        cands = snapshot.candidates(job).candidates
        gpu_type = job.requested_gpu_type
        if gpu_type not in self.max_gpus:
            gpu_type = cands[0].cell.gpu_type if cands else self.gpu_types[0]
        n = job.requested_gpus
        if n is None:
            same = [c for c in cands if c.cell.gpu_type == gpu_type]
            n = same[0].num_gpus if same else 1
        n = min(_pow2_ceil(n), self.max_gpus[gpu_type])
        if self.tuner_cells:
            # A pruned request is dominated by a smaller Cell of its type: start there; else
            # the smallest larger count with a Cell.
            top = self.max_gpus[gpu_type]
            counts = [m for m in _pow2_range(top) if self.options(job, gpu_type, m)]
            smaller = [m for m in counts if m <= n]
            if smaller:
                return gpu_type, smaller[-1]
            if counts:
                return gpu_type, counts[0]
        while n <= self.max_gpus[gpu_type]:
            if self.options(job, gpu_type, n):
                return gpu_type, n
            n *= 2
        n = 1
        while n <= max(self.max_gpus.values()):
            speeds = [(self.best_throughput(job, t, n), -i) for i, t in enumerate(self.gpu_types)]
            best, neg_i = max(speeds)
            if best > 0:
                return self.gpu_types[-neg_i], n
            n *= 2
        return None


# ---------------------------------------------------------------------------------------------
# The decision being planned


@dataclass
class _Held:
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
    victim_bounds: tuple[float | None, float | None] | None = field(
        default=None, init=False, repr=False, compare=False
    )


class _TypeJobs:
    """The movable jobs of one GPU type in arrival order, with suffix sums of their GPUs."""

    def __init__(self, jobs: list[_Held]) -> None:
        self.jobs = jobs
        self.indices = [h.index for h in jobs]
        self.gpus_after = [0] * (len(jobs) + 1)
        for k in range(len(jobs) - 1, -1, -1):
            self.gpus_after[k] = self.gpus_after[k + 1] + jobs[k].num_gpus

    def later_than(self, index: int) -> tuple[list[_Held], int]:
        """Jobs that arrived after trace index ``index`` and the GPUs they hold."""
        k = bisect.bisect_right(self.indices, index)
        return self.jobs[k:], self.gpus_after[k]


class _Carry:
    """What one decision's bookkeeping hands to the next, for less work and the same decisions.

    Both are pure functions of jobs that did not change in between.  ``held`` keeps each
    running job's :class:`_Held` while its record, Cell, placement and estimate stay;
    ``victims`` keeps the last victim ranking of each GPU type while its movable jobs are the
    very same objects.
    """

    def __init__(self) -> None:
        self._held: dict[int, _Held] = {}
        self._victims: dict[str, tuple[list[_Held], _Victims]] = {}

    # A copy (an env's headless rollout copy, a pickled env) starts empty: the carry is only a
    # shortcut, and copying it would copy the job records it points to.
    def __deepcopy__(self, memo: dict[int, object]) -> _Carry:
        return _Carry()

    def __reduce__(self) -> tuple[type[_Carry], tuple[()]]:
        return _Carry, ()

    def held(self, active: tuple[JobView, ...]) -> dict[int, _Held]:
        """Running jobs as movable :class:`_Held` by trace index (in arrival order)."""
        last, out = self._held, {}
        for v in active:
            h = last.get(v.index)
            if (
                h is None
                or h.view is not v
                or h.cell is not v.cell
                or h.placement is not v.placement
                or h.iter_time_s != v.estimated_iter_time_s
            ):
                assert v.cell is not None and v.placement is not None
                thr = v.job.global_batch / v.estimated_iter_time_s
                h = _Held(
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
            out[v.index] = h
        self._held = out
        return dict(out)

    def victims(self, speeds: _SpeedTable, gpu_type: str, jobs: list[_Held]) -> _Victims:
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


class _Ledger:
    """A scratch allocation, the jobs holding GPUs in it and the actions that lead to it.

    Every change goes through :meth:`start`, :meth:`reconfigure`, :meth:`preempt` or
    :meth:`reject`, which update the scratch exactly as the simulator will when it applies the
    recorded action, so the action list stays valid in order.
    """

    def __init__(
        self,
        snapshot: Snapshot,
        speeds: _SpeedTable,
        resume_at: dict[int, float],
        carry: _Carry,
    ) -> None:
        self.snapshot = snapshot
        self.speeds = speeds
        self.alloc = snapshot.scratch()
        self._carry = carry
        self.held = self._carry.held(snapshot.active)
        # Movable jobs per type in arrival order, kept as jobs change (``active`` is in order).
        self._movable: dict[str, list[_Held]] = {t: [] for t in speeds.gpu_types}
        for h in self.held.values():
            self._movable[h.cell.gpu_type].append(h)
        self.waiting = list(snapshot.waiting.indices)
        # Jobs preempted in this decision: one change per job per decision, so they wait for
        # the next one (restarting a victim elsewhere at once would be a second change).
        self.preempted: set[int] = set()
        self.actions: list[Action] = []
        self._resume_at = resume_at
        self._by_type: dict[str, _TypeJobs] = {}
        self._fit: _FitMemo | None = None
        self._victims: dict[str, _Victims] = {}

    @property
    def fit(self) -> _FitMemo:
        """Fit checks on the current scratch allocation."""
        if self._fit is None:
            self._fit = _FitMemo(self.alloc)
        return self._fit

    def _changed(self, left: _Held | None) -> None:
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

    def start(self, index: int, option: _Option) -> None:
        """Start a waiting job on a Cell."""
        view = self.snapshot.job(index)
        placement = self.alloc.place(option.cell)
        assert placement is not None, f"planned start of {view.job.job_id} does not fit"
        self.waiting.remove(index)
        self.held[index] = _Held(
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

    def reconfigure(self, index: int, option: _Option) -> None:
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

    def remaining_iters(self, h: _Held) -> float:
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


# ---------------------------------------------------------------------------------------------
# Pass 1: blockers preempt the opportunistic jobs behind them


def _restart_blockers(ledger: _Ledger, opts: CriusOptions) -> None:
    """Start waiting jobs that fit on idle GPUs plus those of later-arrived (opportunistic) jobs.

    Walks the queue in FIFO order and starts over from the head after each start, as the
    authors' ``pending_jobs_restart_trial``; at most ``max_blocker_trials`` placements are tried.
    """
    trials = 0
    restart = True
    while restart and trials < opts.max_blocker_trials:
        restart = False
        for index in list(ledger.waiting):
            if index in ledger.preempted:
                continue
            job = ledger.snapshot.job(index).job
            quota = ledger.speeds.quota(job, ledger.snapshot)
            if quota is None:
                continue
            later, later_gpus = ledger.on_type(quota[0]).later_than(index)
            if not later or ledger.alloc.free_gpus(quota[0]) + later_gpus < quota[1]:
                continue
            trials += 1
            victims = _fewest_victims(ledger, job, quota, later)
            if victims is not None:
                for victim in victims:
                    ledger.preempt(victim)
                option = ledger.speeds.first_fit(ledger.fit, job, *quota)
                assert option is not None
                ledger.start(index, option)
                restart = True
                break
            if trials >= opts.max_blocker_trials:
                break


def _fewest_victims(
    ledger: _Ledger, job: Job, quota: tuple[str, int], later: list[_Held]
) -> list[int] | None:
    """A minimal set of ``later`` jobs whose GPUs let ``job`` fit, latest arrivals first.

    Releases the latest arrivals until the job fits, then keeps running every released job
    (earliest first) that the job does not need.  None when even all of them are not enough.
    """
    alloc = ledger.alloc.copy()
    released: list[_Held] = []
    for h in reversed(later):
        alloc.release(h.placement)
        released.append(h)
        if ledger.speeds.first_fit(alloc, job, *quota) is not None:
            break
    else:
        return None
    needed = []
    for h in reversed(released):
        alloc.take(h.placement)
        if ledger.speeds.first_fit(alloc, job, *quota) is None:
            alloc.release(h.placement)
            needed.append(h.index)
    return sorted(needed, reverse=True)


# ---------------------------------------------------------------------------------------------
# Pass 2: admission with the bounded downgrade search


@dataclass
class _Node:
    """A state of the downgrade search: changes to running jobs and the new job's quota."""

    alloc: Allocator
    changes: tuple[tuple[int, _Option], ...]  # (running job, its new Cell) in order
    quota: tuple[str, int]
    delta: float  # summed throughput change of the changed running jobs, samples/s
    fit: _FitMemo
    changed: frozenset[int]

    def key(self) -> _Key:
        return frozenset((i, o.cell) for i, o in self.changes), self.quota


@dataclass(frozen=True)
class _Step:
    """A change to one running job from a search state, not yet applied."""

    parent: _Node
    delta: float  # the resulting state's summed throughput change, as :meth:`apply` gives
    victim: _Held
    option: _Option

    def key(self) -> _Key:
        """The key of the state it leads to."""
        pairs = [(i, o.cell) for i, o in self.parent.changes]
        pairs.append((self.victim.index, self.option.cell))
        return frozenset(pairs), self.parent.quota

    def apply(self) -> _Node:
        """The state it leads to (the victim on its new Cell in a copy of the allocation)."""
        node, h, option = self.parent, self.victim, self.option
        alloc = node.alloc.copy()
        alloc.release(h.placement)
        placed = alloc.place(option.cell)
        assert placed is not None
        return _Node(
            alloc,
            (*node.changes, (h.index, option)),
            node.quota,
            self.delta,
            _FitMemo(alloc),
            node.changed | {h.index},
        )


# A search state's identity: its changes to running jobs and the new job's quota.
_Key = tuple[frozenset[tuple[int, Cell]], tuple[str, int]]
# A victim step: the state's throughput change after it, the victim and its new Cell.
_Pick = tuple[float, _Held, _Option]


@dataclass(frozen=True)
class _AdmitPlan:
    """Changes to running jobs (in order) and the Cell the new job starts on."""

    changes: tuple[tuple[int, _Option], ...]
    option: _Option
    gain: float  # summed throughput change including the new job, samples/s


def _victim_bounds(speeds: _SpeedTable, h: _Held) -> tuple[float | None, float | None]:
    """A running job's best-case loss when halved and best-case change when moved (samples/s).

    None where the step is impossible (no Cell at half the count, or at the count elsewhere).
    """
    t, n = h.cell.gpu_type, h.num_gpus
    loss = None
    if n >= 2 and speeds.options(h.job, t, n // 2):
        loss = h.throughput - speeds.best_throughput(h.job, t, n // 2)
    bound = speeds.best_elsewhere(h.job, t, n)
    return loss, (bound - h.throughput if bound > 0 else None)


class _Victims:
    """Running jobs of one GPU type as victims of the downgrade search, pre-ranked once.

    ``shrink`` holds, per GPU count, the jobs whose half count has a feasible Cell, by their
    best-case loss (samples/s) then arrival; ``move`` holds the jobs with a feasible Cell on
    another type at the same count, by count (descending), best-case gain, arrival.  Exact
    checks on a search state then stop as soon as no later entry can beat the best found.
    """

    def __init__(self, speeds: _SpeedTable, gpu_type: str, jobs: list[_Held]) -> None:
        self.gpu_type = gpu_type
        self.others = [t for t in speeds.gpu_types if t != gpu_type]
        shrink: dict[int, list[tuple[float, int, _Held]]] = {}
        move: list[tuple[int, float, int, _Held]] = []
        for h in jobs:
            bounds = h.victim_bounds
            if bounds is None:
                bounds = h.victim_bounds = _victim_bounds(speeds, h)
            loss, change = bounds
            if loss is not None:
                shrink.setdefault(h.num_gpus, []).append((loss, h.index, h))
            if change is not None:
                move.append((-h.num_gpus, -change, h.index, h))
        # Bounds over every entry, for skipping last-step search states that cannot win.
        self.least_shrink_loss = min((e[0] for v in shrink.values() for e in v), default=np.inf)
        self.best_move_change = max((-e[1] for e in move), default=-np.inf)
        self.shrink_counts = sorted(shrink, reverse=True)
        # Trace indices are unique, so plain tuple order is (bound, index) order.
        self._shrink = {n: sorted(v) for n, v in shrink.items()}
        self._pools: dict[int, list[tuple[float, int, _Held]]] = {}
        move.sort()
        self.move = move
        self._move_keys = [e[0] for e in move]
        # Where each entry's count ends in ``move``: within a count, entries are ranked by
        # best-case gain, so once one cannot beat the best move found, neither can the rest.
        self.count_end = [bisect.bisect_right(self._move_keys, key) for key in self._move_keys]

    def shrink_pool(self, changed: frozenset[int]) -> list[tuple[float, int, _Held]]:
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


class _DowngradeSearch:
    """Breadth-first search for room for one waiting job (the authors' ``job_downgrade_search``).

    Each step is one of: halve the new job's GPU count; move the new job to another GPU type
    with enough idle GPUs; halve one running job of a GPU type (among those with at least half
    the largest count there, the least throughput loss); move one running job of a type to
    another type with enough idle GPUs at the same count (the one freeing the most of what the
    new job lacks, then the best throughput change).  Steps on running jobs are tried on the new
    job's current type, and on another type only when a later step can still move the new job
    there.  After every step the new job is placed at its quota; a state where it fits at its
    preferred layout ends its branch.

    Args:
        ledger: the decision so far.
        opts: options.
        index: trace index of the waiting job.
        quota: its starting (GPU type, count).
        depth: search steps.
    """

    def __init__(
        self, ledger: _Ledger, opts: CriusOptions, index: int, quota: tuple[str, int], depth: int
    ) -> None:
        self.ledger = ledger
        self.speeds = ledger.speeds
        self.opts = opts
        self.index = index
        self.job = ledger.snapshot.job(index).job
        self.quota = quota
        self.depth = depth

    def run(self) -> _AdmitPlan | None:
        """The feasible plan with the largest summed throughput (None: nothing fits).

        Two shortcuts keep the result of the plain breadth-first search while building far
        fewer states when many jobs run (bounds in :meth:`_hopeless` and :meth:`_children`):

        * on the last step a child whose gain cannot beat the best plan is not built;
        * on the step before, a victim change none of whose states (itself or its children) can
          beat the best plan is kept unbuilt in the next frontier.  Such a state yields nothing
          when expanded; it only takes one of the ``max_search_nodes`` expansions if its branch
          does not end there, which is settled (by building it) only when that could change
          which states the budget reaches.
        """
        alloc = self.ledger.alloc.copy()
        root = _Node(alloc, (), self.quota, 0.0, _FitMemo(alloc), frozenset())
        best, done = self._evaluate(root, None)
        frontier: list[_Node | _Step] = [] if done else [root]
        seen = {root.key()}
        budget = self.opts.max_search_nodes
        expanded = 0
        for step in range(self.depth):
            remaining = self.depth - step
            nxt: list[_Node | _Step] = []
            unsettled: list[_Step] = []  # hopeless states passed whose expansion is unknown
            for entry in frontier:
                if isinstance(entry, _Step):
                    unsettled.append(entry)
                    continue
                if unsettled and expanded + len(unsettled) >= budget:
                    expanded += sum(not self._ends(s) for s in unsettled)
                    unsettled = []
                if expanded >= budget:
                    break
                expanded += 1
                if remaining == 1 and best is not None:
                    best = self._evaluate_leaves(entry, best, seen)
                    continue
                for child in self._children(entry, remaining):
                    key = child.key()
                    if key in seen:
                        continue
                    seen.add(key)
                    if isinstance(child, _Step):
                        if remaining == 2 and best is not None and self._hopeless(child, best):
                            nxt.append(child)
                            continue
                        child = child.apply()
                    best, done = self._evaluate(child, best)
                    if not done:
                        nxt.append(child)
            frontier = nxt
        return best

    def _bar(self, best: _AdmitPlan) -> float:
        """The gain a state must be able to beat to matter, less a margin above rounding."""
        return best.gain + _TIE_SAMPLES_S - _BOUND_SLACK_SAMPLES_S

    def _hopeless(self, s: _Step, best: _AdmitPlan) -> bool:
        """Whether neither the state of a victim change nor any child of it can beat ``best``.

        Its children are one more step: the new job halved or on another type (same change),
        or one more victim of the new job's type shrunk (at least that type's least loss) or
        moved (at most its best move's gain).
        """
        speeds, job = self.speeds, self.job
        gpu_type, n = s.parent.quota
        victims = self.ledger.victims(gpu_type)
        own = speeds.best_throughput(job, gpu_type, n) + max(
            0.0, -victims.least_shrink_loss, victims.best_move_change
        )
        half = speeds.best_throughput(job, gpu_type, n // 2) if n > 1 else 0.0
        moved = speeds.best_elsewhere(job, gpu_type, n)
        return s.delta + max(own, half, moved) <= self._bar(best)

    def _ends(self, s: _Step) -> bool:
        """Whether a victim change's state ends its branch (so it takes no expansion)."""
        return self._evaluate(s.apply(), None)[1]

    def _evaluate_leaves(self, node: _Node, best: _AdmitPlan, seen: set[_Key]) -> _AdmitPlan:
        """Evaluate a node's children on the last step, skipping those that cannot win.

        A last-step child is never expanded, so it matters only if its gain can beat ``best``.
        Its gain is at most its throughput change plus the new job's fastest option at its
        quota; a child whose bound does not clear ``best`` is neither built nor evaluated.
        """
        current = [best]  # the bar rises as children improve the plan
        for child in self._children(node, 1, lambda: self._bar(current[0])):
            key = child.key()
            if key in seen:
                continue
            seen.add(key)
            plan = self._evaluate(child if isinstance(child, _Node) else child.apply(), current[0])
            assert plan[0] is not None  # evaluating never loses the best plan
            current[0] = plan[0]
        return current[0]

    def _evaluate(self, node: _Node, best: _AdmitPlan | None) -> tuple[_AdmitPlan | None, bool]:
        """Place the new job in a state; returns the better plan and whether the branch ends."""
        option = self.speeds.first_fit(node.fit, self.job, *node.quota)
        if option is None:
            return best, False
        gain = node.delta + option.throughput
        if self.opts.admit_requires_gain and gain <= 0:
            return best, True
        if best is None or gain > best.gain + _TIE_SAMPLES_S:
            best = _AdmitPlan(node.changes, option, gain)
        # A relaxed layout is a plan, but the search may still find a better one below it.
        return best, option is self.speeds.options(self.job, *node.quota)[0]

    def _children(
        self, node: _Node, remaining: int, bar: Callable[[], float] | None = None
    ) -> Iterator[_Node | _Step]:
        """Successor states in the search order (victim changes not yet applied).

        ``bar`` (last step only): the gain a child must be able to beat; a child whose bound (its
        throughput change plus the new job's fastest option at its quota) does not clear it is
        not built.
        """
        gpu_type, n = node.quota
        best_at = self.speeds.best_throughput

        def hopeless(delta: float, quota: tuple[str, int]) -> bool:
            return bar is not None and delta + best_at(self.job, *quota) <= bar()

        if (
            self.opts.scaling
            and n > 1
            and self.speeds.options(self.job, gpu_type, n // 2)
            and not hopeless(node.delta, (gpu_type, n // 2))
        ):
            yield replace(node, quota=(gpu_type, n // 2))
        victim_types = [gpu_type]
        if self.opts.type_change:
            for other in self.speeds.gpu_types:
                if other == gpu_type or not self.speeds.options(self.job, other, n):
                    continue
                if node.alloc.free_gpus(other) >= n:
                    if not hopeless(node.delta, (other, n)):
                        yield replace(node, quota=(other, n))
                elif remaining >= 2:
                    victim_types.append(other)  # free it first, move the new job next step
        for vt in victim_types:
            if self.opts.scaling:
                victims = self.ledger.victims(vt)
                if not hopeless(node.delta - victims.least_shrink_loss, node.quota):
                    found = self._shrink_victim(node, vt)
                    if found is not None and not hopeless(found[0], node.quota):
                        yield _Step(node, *found)
            if self.opts.type_change:
                victims = self.ledger.victims(vt)
                if not hopeless(node.delta + victims.best_move_change, node.quota):
                    found = self._move_victim(node, vt)
                    if found is not None and not hopeless(found[0], node.quota):
                        yield _Step(node, *found)

    def _shrink_victim(self, node: _Node, gpu_type: str) -> _Pick | None:
        """Halve the running job of a type that loses the least throughput."""
        best: tuple[float, int, _Held, _Option] | None = None
        for bound, index, h in self.ledger.victims(gpu_type).shrink_pool(node.changed):
            if best is not None and (bound, index) >= best[:2]:
                break  # ranked by best-case loss: nothing below can lose less
            if index in node.changed:
                continue
            opt = self.speeds.first_fit_released(node.fit, h.placement, h.job, h.num_gpus // 2)
            if opt is None:
                continue
            loss = h.throughput - opt.throughput
            if best is None or (loss, index) < best[:2]:
                best = (loss, index, h, opt)
        if best is None:
            return None
        return node.delta + best[3].throughput - best[2].throughput, best[2], best[3]

    def _move_victim(self, node: _Node, gpu_type: str) -> _Pick | None:
        """Move a running job of a type to the other type where it fares best."""
        victims = self.ledger.victims(gpu_type)
        best_at = self.speeds.best_throughput
        free = {u: node.alloc.free_gpus(u) for u in victims.others}
        lacking = max(1, node.quota[1] - node.alloc.free_gpus(gpu_type))
        best: tuple[int, float, int, _Held, _Option] | None = None
        move, count_end = victims.move, victims.count_end
        k = victims.movable_from(max(free.values(), default=0))
        while k < len(move):
            neg_n, neg_bound, index, h = move[k]
            freed = min(-neg_n, lacking)
            if best is not None:
                if freed < best[0]:
                    break  # ranked by count: nothing below frees as much
                if freed == best[0] and -neg_bound <= best[1]:
                    k = count_end[k]  # nor can the rest of this count
                    continue
            k += 1
            if index in node.changed:
                continue
            for u in victims.others:
                if free[u] < h.num_gpus:
                    continue
                if (
                    best is not None
                    and freed == best[0]
                    and best_at(h.job, u, h.num_gpus) - h.throughput <= best[1]
                ):
                    continue  # even its fastest Cell there would not beat the best move
                opt = self.speeds.first_fit(node.fit, h.job, u, h.num_gpus)
                if opt is None:
                    continue
                change = opt.throughput - h.throughput
                if best is None or (freed, change) > best[:2]:
                    best = (freed, change, index, h, opt)
        if best is None:
            return None
        return node.delta + best[4].throughput - best[3].throughput, best[3], best[4]


def _commit(ledger: _Ledger, index: int, plan: _AdmitPlan) -> None:
    for victim, option in plan.changes:
        ledger.reconfigure(victim, option)
    ledger.start(index, plan.option)


def _admit_waiting(ledger: _Ledger, opts: CriusOptions) -> None:
    """Start waiting jobs in FIFO order: quota placement, else the downgrade search.

    Later jobs backfill past one that does not fit (unless ``opportunistic`` is off).  Only the
    first ``max_searches`` jobs that need it get a downgrade search in one decision.
    """
    snapshot = ledger.snapshot
    speeds = ledger.speeds
    searches = 0
    depth = (
        opts.search_depth
        if len(ledger.held) <= opts.busy_threshold_jobs
        else opts.search_depth_busy
    )
    can_search = (opts.scaling or opts.type_change) and depth > 0
    for index in list(ledger.waiting):
        if index in ledger.preempted:
            continue
        job = snapshot.job(index).job
        quota = speeds.quota(job, snapshot)
        if quota is None:
            ledger.reject(index, speeds.unfit_reason)
            continue
        option = speeds.first_fit(ledger.fit, job, *quota)
        preferred = option is not None and option is speeds.options(job, *quota)[0]
        plan: _AdmitPlan | None = None
        if not preferred and can_search and searches < opts.max_searches:
            searches += 1
            plan = _DowngradeSearch(ledger, opts, index, quota, depth).run()
        if plan is not None:
            _commit(ledger, index, plan)
        elif option is not None:
            ledger.start(index, option)
        elif not opts.opportunistic:
            return  # strict FIFO: the head blocks the queue


# ---------------------------------------------------------------------------------------------
# Pass 3: upgrades on departures


def _pays_back(
    ledger: _Ledger, h: _Held, new_throughput: float, num_gpus: int, remaining_iters: float
) -> bool:
    """Whether finishing on the new Cell, pause included, beats staying put."""
    pause = ledger.snapshot.tuning_overhead_s(num_gpus, "pruned") + ledger.snapshot.restore_s
    saved_s = remaining_iters * h.job.global_batch * (1 / h.throughput - 1 / new_throughput)
    return saved_s > pause


# A candidate upgrade move: (minus its best-case gain in samples/s, job, target type, count),
# so that sorting ranks by best-case gain first.
_Upgrade = tuple[float, int, str, int]


class _UpgradeMoves:
    """The upgrade moves of the jobs movable when the pass starts, by the idle GPUs they need.

    Growing a job of n GPUs to 2n on its type, or moving it to another type at n, needs n idle
    GPUs of the target type.  Each round merges, best-case gain first, the groups whose type has
    that many idle GPUs now; a group is built the first time it opens.  Moves of a job changed
    since the pass started stay listed and are skipped by the pass (it is no longer movable).
    """

    def __init__(self, ledger: _Ledger, opts: CriusOptions) -> None:
        self._speeds = ledger.speeds
        self._opts = opts
        self._by_count: dict[int, list[_Held]] = {}
        for t in self._speeds.gpu_types:
            for h in ledger.on_type(t).jobs:
                self._by_count.setdefault(h.num_gpus, []).append(h)
        self._groups: dict[tuple[str, int], list[_Upgrade]] = {}

    def _group(self, u: str, n: int) -> list[_Upgrade]:
        hit = self._groups.get((u, n))
        if hit is not None:
            return hit
        speeds, opts = self._speeds, self._opts
        grow = opts.scaling and 2 * n <= speeds.max_gpus[u]
        out = []
        for h in self._by_count.get(n, ()):
            if h.cell.gpu_type == u:
                if not grow:
                    continue
                m = 2 * n
            elif opts.type_change:
                m = n
            else:
                continue
            gain = speeds.best_throughput(h.job, u, m) - h.throughput
            if gain > opts.upgrade_min_gain:
                out.append((-gain, h.index, u, m))
        out.sort()
        self._groups[(u, n)] = out
        return out

    def ranked(self, alloc: Allocator) -> Iterator[_Upgrade]:
        """Moves whose target type has enough idle GPUs now, best-case gain first."""
        open_groups = [
            self._group(u, n)
            for u in self._speeds.gpu_types
            for n in self._by_count
            if alloc.free_gpus(u) >= n
        ]
        return heapq.merge(*open_groups)


def _upgrade_pass(ledger: _Ledger, opts: CriusOptions) -> None:
    """Apply up to ``max_upgrade_moves`` single best grow / type-change moves."""
    if opts.max_upgrade_moves == 0 or not (opts.scaling or opts.type_change):
        return
    moves = _UpgradeMoves(ledger, opts)
    for _ in range(opts.max_upgrade_moves):
        best: tuple[float, int, _Option] | None = None
        for neg_bound, index, gpu_type, num_gpus in moves.ranked(ledger.alloc):
            if best is not None and -neg_bound <= best[0] + _TIE_SAMPLES_S:
                break  # sorted by best-case gain: nothing below can beat the best found
            h = ledger.held[index]
            if not h.movable:
                continue
            option = _upgrade_fit(ledger, h, gpu_type, num_gpus)
            if option is None:
                continue
            gain = option.throughput - h.throughput
            if gain <= opts.upgrade_min_gain:
                continue
            if opts.charge_pause and not _pays_back(
                ledger, h, option.throughput, num_gpus, ledger.remaining_iters(h)
            ):
                continue
            if best is None or gain > best[0] + _TIE_SAMPLES_S:
                best = (gain, index, option)
        if best is None:
            return
        ledger.reconfigure(best[1], best[2])


def _upgrade_fit(ledger: _Ledger, h: _Held, gpu_type: str, num_gpus: int) -> _Option | None:
    if gpu_type == h.cell.gpu_type:
        return ledger.speeds.first_fit_released(ledger.fit, h.placement, h.job, num_gpus)
    return ledger.speeds.first_fit(ledger.fit, h.job, gpu_type, num_gpus)


# ---------------------------------------------------------------------------------------------
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
        self._speeds: _SpeedTable | None = None
        self._tables: dict[int, _SpeedTable] = {}
        # When each job the policy (re)started resumes iterating, simulated seconds.
        self._resume_at: dict[int, float] = {}
        self._carry = _Carry()

    def reset(self, context: PolicyContext) -> None:
        """Start a new run: fresh bookkeeping (speeds stay cached per tuner: they are pure)."""
        self._speeds = self._speed_table(context.cluster, context.tuner)
        self._resume_at = {}
        self._carry = _Carry()

    def _speed_table(self, cluster: ClusterSpec, tuner: Tuner) -> _SpeedTable:
        # One table per tuner, kept across runs: its entries are a function of the tuner's
        # (deterministic) estimates, and an env that switches clusters would rebuild it often.
        key = id(tuner)
        hit = self._tables.get(key)
        if hit is None or hit.tuner is not tuner or hit.cluster is not cluster:
            opts = self.options
            hit = _SpeedTable(cluster, tuner, opts.data_parallel_only, opts.tuner_cells)
            self._tables[key] = hit
        return hit

    def decide(self, snapshot: Snapshot) -> list[Action]:
        """Blockers first, then admission in FIFO order, then upgrades if nothing arrived."""
        speeds = self._speeds
        if speeds is None or speeds.tuner is not snapshot.tuner:
            speeds = self._speeds = self._speed_table(snapshot.cluster, snapshot.tuner)
        ledger = _Ledger(snapshot, speeds, self._resume_at, self._carry)
        if self.options.opportunistic:
            _restart_blockers(ledger, self.options)
        _admit_waiting(ledger, self.options)
        if self.options.upgrade_on_arrivals or not _has_arrivals(snapshot):
            _upgrade_pass(ledger, self.options)
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
