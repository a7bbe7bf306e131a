"""The state of one decision: which jobs and Cells the agent sees, and which actions are valid.

The observation and the action mask are both built from one :class:`DecisionState`, so they can
never disagree (a classic source of "invalid action despite masking" reports, sb3-contrib #200).

Action layout (``Discrete(K·C + R·(C+1) + 1)``)::

    a < K·C                         start window job a // C on its candidate Cell a % C
    K·C <= a < K·C + R·(C+1)        running job r = (a − K·C) // (C+1):
                                      j = (a − K·C) % (C+1) < C → reconfigure to its Cell j
                                      j = C                     → preempt
    a = K·C + R·(C+1)               WAIT: let time run to the next event

The running-job block exists only when ``EnvConfig.reconfigure`` is on (R·(C+1) = 0 otherwise).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from crius_gym.env.config import EnvConfig
from crius_gym.env.guide import GuidePlan
from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.cell import Cell, CellEstimate
from crius_gym.sim.actions import Action, Preempt, Reconfigure, Start
from crius_gym.sim.allocator import Allocator, Placement, released_node_gain
from crius_gym.sim.records import JobRecord
from crius_gym.sim.simulator import Simulator
from crius_gym.workload.models import ModelSpec


@dataclass(frozen=True)
class TypeLayout:
    """The cluster's GPU types in group order, for per-type arrays.

    Attributes:
        types: GPU types, in the cluster's group order (a type's *slot* is its index here).
        slot: slot of each type.
        width: columns of a per-type table indexed by free GPUs per node, 0 to the largest
            node size.
        first_node: index of each type's first node among all nodes.
    """

    types: tuple[str, ...]
    slot: dict[str, int]
    width: int
    first_node: tuple[int, ...]

    @classmethod
    def of(cls, cluster: ClusterSpec) -> TypeLayout:
        """The layout of a cluster."""
        types = tuple(g.gpu_type for g in cluster.groups)
        return cls(
            types=types,
            slot={t: i for i, t in enumerate(types)},
            width=max(g.gpus_per_node for g in cluster.groups) + 1,
            first_node=tuple(
                sum(g.num_nodes for g in cluster.groups[:i]) for i in range(len(cluster.groups))
            ),
        )


@dataclass(frozen=True)
class CandidateArrays:
    """What fit checks and the encoder need of a job's candidate Cells, padded to C entries.

    Attributes:
        type_slot: (C,) slot of each Cell's GPU type (0 in padding).
        iter_time_s: (C,) estimated seconds per iteration (0 in padding).
        slot_of: position of each Cell in the candidates.
        shapes: (type slot, GPUs per node, nodes) of each real candidate.
        padding: ``False`` for each padding entry (padding never fits).
    """

    type_slot: np.ndarray
    iter_time_s: np.ndarray
    slot_of: dict[Cell, int]
    shapes: tuple[tuple[int, int, int], ...]
    padding: list[bool]


class CellSelector:
    """The candidate Cells each (model, batch) shows, selected once and cached per env.

    Waiting jobs show ``EnvConfig.window_cell_selection``, running jobs ``cell_selection``. A
    Cell the guide plans for the job (``extra``) is always shown: it takes the last place when
    the selection does not hold it. It must be one of the tuner's Cells of the job; otherwise
    the job shows its usual Cells and the plan's action is not expressible.
    """

    def __init__(self, sim: Simulator, cfg: EnvConfig) -> None:
        self.sim = sim
        self.cfg = cfg
        self.layout = TypeLayout.of(sim.cluster)
        self._cache: dict[
            tuple[ModelSpec, int, bool, Cell | None],
            tuple[tuple[CellEstimate, ...], CandidateArrays],
        ] = {}

    def candidates(
        self, model: ModelSpec, batch: int, running: bool, extra: Cell | None = None
    ) -> tuple[tuple[CellEstimate, ...], CandidateArrays]:
        """A waiting (``running=False``) or running job's candidate Cells, with their arrays."""
        key = (model, batch, running, extra)
        hit = self._cache.get(key)
        if hit is None:
            if extra is not None:
                base = self.candidates(model, batch, running)
                if any(ce.cell == extra for ce in base[0]):
                    self._cache[key] = base
                    return base
            ranked = self.sim.tuner.tune(model, batch).candidates
            how = self.cfg.cell_selection if running else self.cfg.window_cell_selection
            cells = select_cells(ranked, self.cfg.cells_per_job, how)
            if extra is not None:
                planned = next((ce for ce in ranked if ce.cell == extra), None)
                if planned is not None:
                    cells = (*cells[: self.cfg.cells_per_job - 1], planned)
            hit = (cells, self._arrays(cells))
            self._cache[key] = hit
        return hit

    def _arrays(self, cells: tuple[CellEstimate, ...]) -> CandidateArrays:
        pad = self.cfg.cells_per_job - len(cells)
        layouts = [(ce.cell.gpu_type, ce.cell.layout) for ce in cells]
        shapes = tuple(
            (self.layout.slot[t], lay.gpus_per_node, lay.num_nodes) for t, lay in layouts
        )
        return CandidateArrays(
            type_slot=np.array([t for t, _, _ in shapes] + [0] * pad),
            iter_time_s=np.array([ce.iter_time_s for ce in cells] + [0.0] * pad),
            slot_of={ce.cell: j for j, ce in enumerate(cells)},
            shapes=shapes,
            padding=[False] * pad,
        )


class FitIndex:
    """Answers "does this Cell fit now?" from per-type histograms of free GPUs per node.

    ``rows[slot][g]`` = nodes of the type with at least ``g`` free GPUs, so a ``k × g`` Cell
    fits iff ``rows[slot][g] >= k``: one lookup instead of a scan of the nodes per Cell.
    Lookups go through Python lists: with a handful of Cells per job they beat numpy calls.

    Args:
        alloc: the allocation state (read once; build a new index after it changes).
        layout: the cluster's type layout (computed from ``alloc`` when omitted).
    """

    def __init__(self, alloc: Allocator, layout: TypeLayout | None = None) -> None:
        self.layout = layout or TypeLayout.of(alloc.cluster)
        lay = self.layout
        #: ``rows[slot][g]``: nodes of the type with at least ``g`` free GPUs (Python lists:
        #: fast single lookups), the suffix sums of the allocator's per-type histograms.
        self.rows: list[list[int]] = []
        for t in lay.types:
            hist = alloc.histogram(t)
            row, nodes = [0] * lay.width, 0
            for g in range(len(hist) - 1, -1, -1):
                nodes += hist[g]
                row[g] = nodes
            self.rows.append(row)
        self._free: list[int] = alloc.free_list_all()  # all nodes, groups in order

    def fits(self, cell: Cell) -> bool:
        """Whether the Cell fits in the free GPUs."""
        t = self.layout.slot.get(cell.gpu_type)
        g = cell.layout.gpus_per_node
        return t is not None and g < self.layout.width and self.rows[t][g] >= cell.layout.num_nodes

    def fits_after_release(self, cell: Cell, placement: Placement) -> bool:
        """Whether the Cell would fit once ``placement``'s GPUs are free again."""
        t = self.layout.slot.get(cell.gpu_type)
        g = cell.layout.gpus_per_node
        if t is None or g >= self.layout.width:
            return False
        return self._fits_after(t, g, cell.layout.num_nodes, placement)

    def _fits_after(self, t: int, g: int, nodes: int, placement: Placement) -> bool:
        base = self.rows[t][g]
        if t != self.layout.slot[placement.gpu_type] or base >= nodes:
            return base >= nodes
        # The allocator's rule (Allocator.fits_after_release), counted from the histogram.
        free, first = self._free, self.layout.first_node[t]
        own = [free[first + n] for n in placement.nodes]
        return base + released_node_gain(own, placement.gpus_per_node, g) >= nodes

    def fits_all(self, cands: CandidateArrays) -> list[bool]:
        """Whether each candidate fits (C entries; padding False)."""
        rows = self.rows
        return [rows[t][g] >= k for t, g, k in cands.shapes] + cands.padding

    def fits_all_after_release(self, cands: CandidateArrays, placement: Placement) -> list[bool]:
        """Whether each candidate would fit once ``placement``'s GPUs are free again."""
        return [self._fits_after(t, g, k, placement) for t, g, k in cands.shapes] + cands.padding


@dataclass
class DecisionState:
    """What the agent sees and may do at one decision.

    Attributes:
        now_s: simulated time.
        window: waiting jobs shown (≤ K), in window order.
        cells: each window job's candidate Cells (≤ C, see ``EnvConfig.window_cell_selection``).
        cell_arrays: the same candidates as padded arrays.
        fits: (K, C) whether each candidate fits now.
        running: running jobs shown (≤ R; empty unless reconfiguring).
        run_cells: each running job's candidate Cells (≤ C).
        run_cell_arrays: the same candidates as padded arrays.
        run_valid: (R, C + 1) whether each reconfiguration (and, last column, preemption) is
            valid.
        waiting_total: all waiting jobs.
        wait_valid: WAIT can change something (arrivals pending or jobs active).
        mask: the flat action mask.
        index: where Cells fit now (per-type free-GPU histograms).
        fitting_jobs: window jobs with a candidate that can start now.
        has_choice: some action other than WAIT is valid.
        plan: the guide's remaining plan when the env shows it (``guide_hint``), else None.
    """

    now_s: float
    window: list[JobRecord]
    cells: list[tuple[CellEstimate, ...]]
    cell_arrays: list[CandidateArrays]
    fits: np.ndarray
    running: list[JobRecord]
    run_cells: list[tuple[CellEstimate, ...]]
    run_cell_arrays: list[CandidateArrays]
    run_valid: np.ndarray
    waiting_total: int
    wait_valid: bool
    mask: np.ndarray
    index: FitIndex
    fitting_jobs: int
    has_choice: bool
    plan: GuidePlan | None = None


def select_cells(
    ranked: tuple[CellEstimate, ...], count: int, how: str
) -> tuple[CellEstimate, ...]:
    """``count`` of a job's tuner Cells (``ranked``: best throughput first); see EnvConfig."""
    if how == "fastest" or len(ranked) <= count:
        return ranked[:count]
    chosen: list[CellEstimate] = []
    seen_counts: set[int] = set()
    for ce in sorted(ranked, key=lambda c: (c.num_gpus, -c.throughput)):
        if ce.num_gpus not in seen_counts:
            seen_counts.add(ce.num_gpus)
            chosen.append(ce)
    types = {ce.cell.gpu_type for ce in chosen}
    for ce in ranked:
        if ce.cell.gpu_type not in types:
            types.add(ce.cell.gpu_type)
            chosen.append(ce)
    taken = {id(ce) for ce in chosen}
    chosen += [ce for ce in ranked if id(ce) not in taken]
    return tuple(chosen[:count])


def _select_window(
    sim: Simulator,
    cfg: EnvConfig,
    index: FitIndex,
    selector: CellSelector,
    plan: GuidePlan | None,
) -> tuple[list[JobRecord], list[tuple[CellEstimate, ...]], list[CandidateArrays]]:
    """K waiting jobs, shown in arrival order.

    Chosen in this order: the jobs the guide plans to start (plan order), the first
    ``head_jobs`` waiting jobs, the earliest later jobs with a Cell that fits now, then the
    next blocked ones.
    """
    recs = sim.records
    waiting = sim.waiting_indices
    starts = plan.starts if plan is not None else {}
    order = plan.order if plan is not None else []
    chosen = list(dict.fromkeys(i for i in order if i in starts))[: cfg.window_jobs]
    taken = set(chosen)
    cands: dict[int, tuple[tuple[CellEstimate, ...], CandidateArrays]] = {}

    def top(i: int) -> tuple[tuple[CellEstimate, ...], CandidateArrays]:
        if i not in cands:
            job = recs[i].job
            cands[i] = selector.candidates(
                job.model, job.global_batch, running=False, extra=starts.get(i)
            )
        return cands[i]

    for i in waiting[: cfg.head_jobs]:
        if len(chosen) >= cfg.window_jobs:
            break
        if i not in taken:
            chosen.append(i)
            taken.add(i)
    rest = [i for i in waiting[cfg.head_jobs :] if i not in taken]
    room = cfg.window_jobs - len(chosen)
    if room > 0 and rest:
        picked: list[int] = []
        for i in rest:  # the earliest later jobs that can start now
            if any(index.fits_all(top(i)[1])):
                picked.append(i)
                if len(picked) == room:
                    break
        if len(picked) < room:  # fill with the next blocked jobs
            got = set(picked)
            picked += [i for i in rest if i not in got][: room - len(picked)]
        chosen += picked
    chosen.sort()  # arrival order: a row's position says nothing about the plan
    shown = [top(i) for i in chosen]
    return [recs[i] for i in chosen], [c for c, _ in shown], [a for _, a in shown]


def _select_running(sim: Simulator, cfg: EnvConfig, plan: GuidePlan | None) -> list[int]:
    """R running jobs, in arrival order: the guide's planned moves and preemptions first."""
    active = sim.active_indices
    if plan is None or not (plan.moves or plan.preempts):
        return list(active[: cfg.running_jobs])
    live = set(active)
    first = [i for i in plan.order if (i in plan.moves or i in plan.preempts) and i in live]
    chosen = list(dict.fromkeys(first))[: cfg.running_jobs]
    taken = set(chosen)
    chosen += [i for i in active if i not in taken][: cfg.running_jobs - len(chosen)]
    return sorted(chosen)


def build_decision_state(
    sim: Simulator,
    cfg: EnvConfig,
    selector: CellSelector,
    acted: frozenset[int] = frozenset(),
    plan: GuidePlan | None = None,
    origins: Mapping[int, Cell] | None = None,
) -> DecisionState:
    """The decision state of the simulator now.

    ``plan``: the guide's remaining plan; its jobs are shown, and the Cells it plans for them.

    ``origins``: jobs changed at this instant that may change again (``changes_per_instant``
    above 1), with the Cell each held when the instant began: no action puts a job back there
    (it would undo the first change and pay its restore twice).

    ``acted``: trace indices of jobs already started, moved or preempted at this instant; they
    get no further action until time moves (one change per job per instant, as in Crius —
    otherwise a policy could reconfigure, or preempt and restart, forever without time
    passing). Preemption is offered only while some job waits: it can only help by freeing
    GPUs for a waiting job.
    """
    k, c, r = cfg.window_jobs, cfg.cells_per_job, cfg.running_jobs
    index = FitIndex(sim.allocator, selector.layout)
    window, cells, arrays = _select_window(sim, cfg, index, selector, plan)
    # Rows are built as Python lists and converted once: C is small, numpy calls are not.
    none = [False] * c
    fit_rows = [
        none if window[i].index in acted else index.fits_all(cands)  # changed at this instant:
        for i, cands in enumerate(arrays)  # no restart until time moves
    ]
    if origins:  # a job preempted at this instant does not restart where it was
        for i, cands in enumerate(arrays):
            back = origins.get(window[i].index)
            if back is not None and (j := cands.slot_of.get(back)) is not None:
                fit_rows[i] = list(fit_rows[i])  # rows may share the all-False list
                fit_rows[i][j] = False
    fit_rows += [none] * (k - len(fit_rows))
    running: list[JobRecord] = []
    run_cells: list[tuple[CellEstimate, ...]] = []
    run_arrays: list[CandidateArrays] = []
    run_rows: list[list[bool]] = []
    if cfg.reconfigure:
        recs = sim.records
        # Preempting only helps a waiting job (it frees GPUs for it).
        someone_waits = bool(sim.waiting_indices)
        moves = plan.moves if plan is not None else {}
        for i in _select_running(sim, cfg, plan):
            rec = recs[i]
            running.append(rec)
            cs, cands = selector.candidates(
                rec.job.model, rec.job.global_batch, running=True, extra=moves.get(i)
            )
            run_cells.append(cs)
            run_arrays.append(cands)
            assert rec.placement is not None and rec.cell is not None
            if i in acted:
                run_rows.append([False] * (c + 1))
                continue
            valid = index.fits_all_after_release(cands, rec.placement)
            current = cands.slot_of.get(rec.cell)
            if current is not None:  # moving to the Cell it is on is no move
                valid[current] = False
            back = origins.get(i) if origins else None
            if back is not None and (j := cands.slot_of.get(back)) is not None:
                valid[j] = False  # nor back to where the instant found it
            valid.append(someone_waits)
            run_rows.append(valid)
    run_rows += [[False] * (c + 1)] * (r - len(run_rows))
    fitting = sum(map(any, fit_rows))
    fits = np.array(fit_rows, dtype=bool)
    run_valid = np.array(run_rows, dtype=bool)
    wait_valid = sim.has_future_events
    parts = [fits.reshape(-1), run_valid.reshape(-1)] if cfg.reconfigure else [fits.reshape(-1)]
    mask = np.concatenate([*parts, [wait_valid]])
    return DecisionState(
        now_s=sim.now_s,
        window=window,
        cells=cells,
        cell_arrays=arrays,
        fits=fits,
        running=running,
        run_cells=run_cells,
        run_cell_arrays=run_arrays,
        run_valid=run_valid,
        waiting_total=len(sim.waiting_indices),
        wait_valid=wait_valid,
        mask=mask,
        index=index,
        fitting_jobs=fitting,
        has_choice=fitting > 0 or any(map(any, run_rows)),
        plan=plan if cfg.guide_hint else None,
    )


def express_next(
    sim: Simulator,
    cfg: EnvConfig,
    selector: CellSelector,
    acted: frozenset[int] | set[int],
    plan: GuidePlan,
    origins: Mapping[int, Cell] | None = None,
) -> Action | None:
    """The plan's next action as the env would take it now, or None where no env action can.

    Equal to decoding the env action that expresses ``plan.next`` in
    ``build_decision_state(sim, cfg, selector, acted, plan)`` (the same Cell object, so the
    guide sees its own proposal taken), without building that state: only the next action's
    job is looked at. A guide-following rollout (``CriusEnv.rollout_cost``) asks this at every
    step, where the full state would cost most of its time. It relies on the plan's first job
    always being shown: ``_select_window`` and ``_select_running`` put the plan's jobs first.
    """
    action = plan.next
    if action is None:
        return None
    i = plan.order[0]  # the trace index of the next action's job
    if isinstance(action, Start | Reconfigure) and action.tuning != cfg.tuning:
        return None
    if i in acted:  # changed at this instant: nothing more until time moves
        return None
    rec = sim.records[i]
    if isinstance(action, Start):
        if action.constraints is not None:
            return None
        cells, _ = selector.candidates(
            rec.job.model, rec.job.global_batch, running=False, extra=plan.starts.get(i)
        )
        # A job's candidate Cells are distinct: the first equal one is the one shown. The
        # allocator's fit rule is the one FitIndex counts from its histograms.
        ce = next((ce for ce in cells if ce.cell == action.cell), None)
        if ce is None or not sim.allocator.can_place(ce.cell):
            return None
        if origins and origins.get(i) == ce.cell:  # restarting where it was preempted now
            return None
        return Start(action.job_id, ce.cell, None, cfg.tuning)
    if not cfg.reconfigure or not isinstance(action, Preempt | Reconfigure):
        return None
    if not sim.holds_gpus(i):  # not running: not among the running jobs shown
        return None
    assert rec.placement is not None and rec.cell is not None
    if isinstance(action, Preempt):
        return action if sim.waiting_indices else None
    if action.constraints is not None:
        return None
    cells, _ = selector.candidates(
        rec.job.model, rec.job.global_batch, running=True, extra=plan.moves.get(i)
    )
    ce = next((ce for ce in cells if ce.cell == action.cell), None)
    if ce is None or ce.cell == rec.cell:  # moving to the Cell it is on is no move
        return None
    if origins and origins.get(i) == ce.cell:  # back to where the instant found it
        return None
    if not sim.allocator.fits_after_release(ce.cell, rec.placement):
        return None
    return Reconfigure(action.job_id, ce.cell, None, cfg.tuning)
