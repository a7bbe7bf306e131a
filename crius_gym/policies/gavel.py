"""Gavel-style heterogeneity-aware max-sum throughput, and helpers shared by the DP baselines.

The helpers (data-parallel speed, launches, the assignment program) also serve
:mod:`~crius_gym.policies.sia` and :mod:`~crius_gym.policies.las`.

**Shared treatment** (the Crius artifact's, see ``docs/baselines.md``): the baselines *decide*
from data-parallel information — the speed of a job on (GPU type, GPU count) is its
data-parallel replica's samples/s at the fastest layout, and a job whose replica fits nowhere
they may place it is rejected with a reason — but they *run* "+AP": the Cell they start uses the
best plan of the chosen layout and pays the unpruned tuning overhead (``tuning="full"``).

**Gavel** (Narayanan et al., OSDI'20, policy ``max_sum_throughput_perf``, adapted as the Crius
artifact's port does to whole, non-time-sliced allocations): every job keeps its requested GPU
count and may change GPU type.  At each decision an integer program picks a type for running jobs
(which must keep one) and for a window of waiting jobs (which may get none), maximising the sum of
normalised throughputs (throughput on the type ÷ the job's best throughput over types) under
per-type GPU capacity, with at most ``max_migrations`` running jobs changing type.  The solution is
realised node by node: migrations, then starts in arrival order, then a backfill of GPUs left idle
by jobs that did not fit node-wise.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import Layout, PlanConstraints
from crius_gym.perf.tuner import Tuner, layouts_for
from crius_gym.policies.baselines import DATA_PARALLEL
from crius_gym.policies.placement import requested_allocation
from crius_gym.policies.registry import register
from crius_gym.sim.actions import Action, Reconfigure, Reject, Start, TuningMode
from crius_gym.sim.allocator import Allocator
from crius_gym.sim.policy import PolicyContext
from crius_gym.sim.records import JobView
from crius_gym.sim.snapshot import Snapshot
from crius_gym.workload.job import Job

# ---------------------------------------------------------------------------------------------
# Shared by the data-parallel-informed baselines (gavel, sia, las).

#: What a planner compares to decide whether anything happened since its last decision: trace
#: arrivals still to come and free GPUs per type.  Every arrival changes the first, every
#: completion frees GPUs; nothing else changes a job set or an allocation between decisions.
StateKey = tuple[int, tuple[int, ...]]

#: A configuration: (GPU type, GPU count).
Config = tuple[str, int]

# Earlier jobs win ties in the assignment program: far below any real difference of value.
_FIFO_TIE_BREAK = 1e-4


@dataclass(frozen=True)
class Launch:
    """How a baseline starts a job on a layout: the Cell, its plan restriction and tuning mode."""

    cell: Cell
    constraints: PlanConstraints | None
    tuning: TuningMode


@contextlib.contextmanager
def _quiet_native_stdout() -> Iterator[None]:
    """Silence what the HiGHS library prints to the process's stdout itself.

    Some HiGHS builds print debug lines (``HighsMipSolverData::transformNewIntegerFeasible
    Solution tmpSolver.run();``) whatever ``disp`` says; they would land in progress bars.
    """
    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no real stdout (some embedded runners): nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


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


def assign(
    values: Sequence[Mapping[Config, float]],
    must_assign: Sequence[bool],
    capacity: Mapping[str, int],
    limited: Sequence[Collection[Config]] | None = None,
    limit: int = 0,
    mip_rel_gap: float = 1e-3,
) -> list[Config | None] | None:
    """Give each job at most one configuration, maximising the summed value (HiGHS program).

    A generalised assignment: per-type GPU capacity, exactly one configuration for the jobs that
    must keep running, and optionally at most ``limit`` of the ``limited`` configurations (e.g.
    migrations).  Jobs with identical choices (same configurations, values and limits) are
    interchangeable, so they are solved as one class with an integer count per configuration:
    it shrinks the program several-fold on real queues and removes the symmetry that makes
    branch and bound slow.  Inside a class, earlier jobs get the higher-valued configurations,
    and classes whose first job is earlier win ties (FIFO).

    Args:
        values: per job, in priority order, the value of each allowed (GPU type, GPUs).
        must_assign: per job, whether it must get a configuration.
        capacity: GPUs of each type.
        limited: per job, the configurations that count toward ``limit``.
        limit: see ``limited``.
        mip_rel_gap: relative optimality gap at which HiGHS stops (deterministic, unlike a
            time limit).

    Returns:
        Per job its configuration (None: none); None when HiGHS found no solution.
    """
    classes: dict[tuple[bool, tuple[tuple[Config, float, bool], ...]], list[int]] = {}
    for k, vals in enumerate(values):
        lim = limited[k] if limited is not None else ()
        key = (bool(must_assign[k]), tuple(sorted((c, v, c in lim) for c, v in vals.items())))
        classes.setdefault(key, []).append(k)
    types = list(capacity)
    var_class, var_cfg, obj, size, gpus, type_row, in_limit = [], [], [], [], [], [], []
    for g, ((_, options), members) in enumerate(classes.items()):
        for cfg, value, is_limited in options:
            var_class.append(g)
            var_cfg.append(cfg)
            obj.append(value + _FIFO_TIE_BREAK * (len(classes) - g) / len(classes))
            size.append(len(members))
            gpus.append(cfg[1])
            type_row.append(len(classes) + types.index(cfg[0]))
            in_limit.append(is_limited)
    if not obj:
        return [None] * len(values)
    num_vars, num_classes = len(obj), len(classes)
    cols = np.arange(num_vars)
    rows = [np.array(var_class), np.array(type_row)]
    data = [np.ones(num_vars), np.array(gpus, dtype=float)]
    col_idx = [cols, cols]
    counts = np.array([len(m) for m in classes.values()], dtype=float)
    lower = [np.where([key[0] for key in classes], counts, 0.0), np.zeros(len(types))]
    upper = [counts, np.array([capacity[t] for t in types], dtype=float)]
    limited_vars = np.flatnonzero(in_limit)
    if limited is not None:
        rows.append(np.full(len(limited_vars), num_classes + len(types)))
        data.append(np.ones(len(limited_vars)))
        col_idx.append(limited_vars)
        lower.append(np.zeros(1))
        upper.append(np.array([float(limit)]))
    matrix = sparse.coo_array(
        (np.concatenate(data), (np.concatenate(rows), np.concatenate(col_idx))),
        shape=(num_classes + len(types) + (limited is not None), num_vars),
    ).tocsr()
    with _quiet_native_stdout():
        res = milp(
            -np.array(obj),
            integrality=np.ones(num_vars),
            bounds=Bounds(0, np.array(size, dtype=float)),
            constraints=LinearConstraint(matrix, np.concatenate(lower), np.concatenate(upper)),
            options={"mip_rel_gap": mip_rel_gap, "disp": False},
        )
    if res.x is None:
        return None
    chosen: list[Config | None] = [None] * len(values)
    taken = np.rint(res.x).astype(np.int64)
    class_of = np.array(var_class)
    for g, members in enumerate(classes.values()):
        slots = sorted(
            (-obj[i], var_cfg[i], int(taken[i]))
            for i in np.flatnonzero(class_of == g)
            if taken[i] > 0
        )
        queue = iter(members)
        for _, cfg, count in slots:
            for _ in range(count):
                chosen[next(queue)] = cfg
    return chosen


# ---------------------------------------------------------------------------------------------
# Gavel.

# A running job moves only for a strict gain (a move costs a restart); far below any real
# difference of normalised throughput, above the FIFO tie-break.
_MIGRATION_TIE_BREAK = 1e-3


@register("gavel")
class Gavel:
    """Heterogeneity-aware max-sum normalised throughput with fixed GPU counts (Gavel).

    Args:
        round_s: also re-decide this often (Gavel's round is 360 s); a round at which nothing
            happened since the last decision and nothing migrated then is skipped, since the
            program would return the same answer.  None: decide at arrivals and completions only.
        max_migrations: running jobs that may change GPU type per decision (the Crius artifact's
            port: 3).
        max_waiting: waiting jobs (in arrival order) offered to the program, to bound its size.
        auto_parallel: run the chosen layout's best plan, paying the unpruned tuning ("+AP",
            default); False runs data parallelism untuned.
    """

    name = "gavel"

    def __init__(
        self,
        round_s: float | None = 360.0,
        max_migrations: int = 3,
        max_waiting: int = 256,
        auto_parallel: bool = True,
    ) -> None:
        self.tick_interval_s = round_s
        self.max_migrations = max_migrations
        self.max_waiting = max_waiting
        self.auto_parallel = auto_parallel
        self._speeds: dict[int, dict[str, float]] = {}
        self._expected: StateKey | None = None

    def reset(self, context: PolicyContext) -> None:
        """Forget the previous run's jobs."""
        self._speeds = {}
        self._expected = None

    def _type_speeds(self, snapshot: Snapshot, view: JobView) -> dict[str, float]:
        """Data-parallel samples/s per GPU type at the job's GPU count (cached per job)."""
        speeds = self._speeds.get(view.index)
        if speeds is None:
            job, cell = view.job, held_cell(view)
            n = cell.num_gpus if cell is not None else requested_gpu_count(job, snapshot)
            speeds = {}
            for t in snapshot.cluster.gpu_types:
                thr = dp_throughput(snapshot.tuner, job, t, n)
                if thr is not None:
                    speeds[t] = thr
            self._speeds[view.index] = speeds
        return speeds

    def decide(self, snapshot: Snapshot) -> Sequence[Action]:
        """Reject DP-infeasible jobs, solve the type assignment, realise it node by node."""
        if self._expected is not None and state_key(snapshot) == self._expected:
            return []
        actions: list[Action] = []
        waiting: list[JobView] = []
        for view in snapshot.waiting:
            if self._type_speeds(snapshot, view):
                waiting.append(view)
            else:
                n = requested_gpu_count(view.job, snapshot)
                actions.append(
                    Reject(
                        view.job.job_id,
                        f"no data-parallel replica fits in memory "
                        f"on {n} GPUs of any type (DP-based baseline)",
                    )
                )
        jobs = list(snapshot.active) + waiting[: self.max_waiting]
        jobs.sort(key=lambda v: v.index)  # arrival order, for the FIFO tie-break
        assigned = self._solve(snapshot, jobs)
        alloc = snapshot.scratch()
        migrated = 0
        if assigned is not None:
            moved = self._migrate(snapshot, alloc, jobs, assigned)
            migrated = len(moved)
            actions += moved
            actions += self._start(snapshot, alloc, jobs, assigned)
        self._expected = None if migrated else state_key(snapshot, alloc)
        return actions

    def _solve(self, snapshot: Snapshot, jobs: list[JobView]) -> dict[int, str] | None:
        """The program's GPU type per job index (absent: stays waiting); None if it failed."""
        values: list[dict[Config, float]] = []
        moves: list[set[Config]] = []
        for view in jobs:
            speeds = dict(self._type_speeds(snapshot, view))
            cell = held_cell(view)
            current = cell.gpu_type if cell is not None else None
            if current is not None:
                speeds.setdefault(current, 0.0)  # a running job may always stay where it is
            best = max(speeds.values()) or 1.0
            n = cell.num_gpus if cell is not None else requested_gpu_count(view.job, snapshot)
            values.append(
                {
                    (t, n): thr / best - (_MIGRATION_TIE_BREAK if current not in (None, t) else 0.0)
                    for t, thr in speeds.items()
                }
            )
            moves.append({(t, n) for t in speeds if current not in (None, t)})
        capacity = {t: snapshot.cluster.group(t).num_gpus for t in snapshot.cluster.gpu_types}
        chosen = assign(
            values, [v.placement is not None for v in jobs], capacity, moves, self.max_migrations
        )
        if chosen is None:
            return None
        return {v.index: c[0] for v, c in zip(jobs, chosen, strict=True) if c is not None}

    def _migrate(
        self, snapshot: Snapshot, alloc: Allocator, jobs: list[JobView], assigned: dict[int, str]
    ) -> list[Action]:
        """Move running jobs to their new type; retry failures after others have moved away."""
        pending = [
            v
            for v in jobs
            if v.placement is not None
            and assigned.get(v.index, v.placement.gpu_type) != v.placement.gpu_type
        ]
        actions: list[Action] = []
        progress = True
        while pending and progress:
            progress, rest = False, []
            for view in pending:
                assert view.placement is not None
                alloc.release(view.placement)
                launch = first_fitting(
                    alloc,
                    launches(
                        snapshot.tuner,
                        view.job,
                        assigned[view.index],
                        view.placement.num_gpus,
                        self.auto_parallel,
                    ),
                )
                if launch is None:
                    alloc.take(view.placement)  # stays where it is
                    rest.append(view)
                    continue
                alloc.place(launch.cell)
                actions.append(
                    Reconfigure(view.job.job_id, launch.cell, launch.constraints, launch.tuning)
                )
                progress = True
            pending = rest
        return actions

    def _start(
        self, snapshot: Snapshot, alloc: Allocator, jobs: list[JobView], assigned: dict[int, str]
    ) -> list[Action]:
        """Start assigned waiting jobs in arrival order, then backfill GPUs left idle."""
        actions: list[Action] = []
        waiting = [v for v in jobs if v.placement is None]
        started: set[int] = set()
        for backfill in (False, True):
            for view in waiting:
                if view.index in started or (not backfill and view.index not in assigned):
                    continue
                speeds = self._type_speeds(snapshot, view)
                # The assigned type first; in the backfill, the others by decreasing speed.
                types = [assigned[view.index]] if view.index in assigned else []
                if backfill:
                    types += sorted(speeds, key=lambda t: -speeds[t])
                n = requested_gpu_count(view.job, snapshot)
                for t in types:
                    launch = first_fitting(
                        alloc, launches(snapshot.tuner, view.job, t, n, self.auto_parallel)
                    )
                    if launch is not None:
                        alloc.place(launch.cell)
                        actions.append(
                            Start(view.job.job_id, launch.cell, launch.constraints, launch.tuning)
                        )
                        started.add(view.index)
                        break
        return actions
