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

from dataclasses import dataclass

import numpy as np

from crius_gym.env.config import EnvConfig
from crius_gym.perf.cell import Cell, CellEstimate
from crius_gym.sim.allocator import Allocator, Placement
from crius_gym.sim.records import JobRecord
from crius_gym.sim.simulator import Simulator
from crius_gym.workload.models import ModelSpec


class CellSelector:
    """The candidate Cells each (model, batch) shows, selected once and cached per env."""

    def __init__(self, sim: Simulator, cfg: EnvConfig) -> None:
        self.sim = sim
        self.cfg = cfg
        self._cache: dict[tuple[ModelSpec, int], tuple[CellEstimate, ...]] = {}

    def cells(self, model: ModelSpec, batch: int) -> tuple[CellEstimate, ...]:
        """A job's candidate Cells."""
        key = (model, batch)
        hit = self._cache.get(key)
        if hit is None:
            ranked = self.sim.tuner.tune(model, batch).candidates
            hit = select_cells(ranked, self.cfg.cells_per_job, self.cfg.cell_selection)
            self._cache[key] = hit
        return hit


class FitIndex:
    """Answers "does this Cell fit now?" from per-type histograms of free GPUs per node.

    ``nodes_with[type][g]`` = nodes with at least ``g`` free GPUs, so a ``k × g`` Cell fits iff
    ``nodes_with[type][g] >= k``: one lookup instead of a scan of the nodes per Cell.
    """

    def __init__(self, alloc: Allocator) -> None:
        self._nodes_with: dict[str, np.ndarray] = {}
        self._free: dict[str, np.ndarray] = {}
        for g in alloc.cluster.groups:
            free = alloc.free_per_node(g.gpu_type)
            self._free[g.gpu_type] = free
            counts = np.bincount(free, minlength=g.gpus_per_node + 1)
            self._nodes_with[g.gpu_type] = np.cumsum(counts[::-1])[::-1]

    def fits(self, cell: Cell) -> bool:
        """Whether the Cell fits in the free GPUs."""
        table = self._nodes_with.get(cell.gpu_type)
        g = cell.layout.gpus_per_node
        return table is not None and g < len(table) and int(table[g]) >= cell.layout.num_nodes

    def fits_after_release(self, cell: Cell, placement: Placement) -> bool:
        """Whether the Cell would fit once ``placement``'s GPUs are free again."""
        if cell.gpu_type != placement.gpu_type:
            return self.fits(cell)
        table = self._nodes_with[cell.gpu_type]
        g = cell.layout.gpus_per_node
        if g >= len(table):
            return False
        free = self._free[cell.gpu_type]
        # A released node counts for g only if it had fewer than g free GPUs before.
        gained = sum(1 for n in placement.nodes if free[n] < g <= free[n] + placement.gpus_per_node)
        return int(table[g]) + gained >= cell.layout.num_nodes


@dataclass
class DecisionState:
    """What the agent sees and may do at one decision.

    Attributes:
        now_s: simulated time.
        window: waiting jobs shown (≤ K), in window order.
        cells: each window job's candidate Cells (≤ C, the tuner's ranking).
        fits: (K, C) whether each candidate fits now.
        running: running jobs shown (≤ R; empty unless reconfiguring).
        run_cells: each running job's candidate Cells (≤ C).
        run_valid: (R, C + 1) whether each reconfiguration (and, last column, preemption) is
            valid.
        waiting_total: all waiting jobs.
        wait_valid: WAIT can change something (arrivals pending or jobs active).
        mask: the flat action mask.
    """

    now_s: float
    window: list[JobRecord]
    cells: list[tuple[CellEstimate, ...]]
    fits: np.ndarray
    running: list[JobRecord]
    run_cells: list[tuple[CellEstimate, ...]]
    run_valid: np.ndarray
    waiting_total: int
    wait_valid: bool
    mask: np.ndarray

    @property
    def has_choice(self) -> bool:
        """Some action other than WAIT is valid."""
        return bool(self.mask[:-1].any())


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
    sim: Simulator, cfg: EnvConfig, index: FitIndex, selector: CellSelector
) -> tuple[list[JobRecord], list[tuple[CellEstimate, ...]]]:
    recs = sim.records
    waiting = sim.waiting_indices
    chosen: list[int] = list(waiting[: cfg.head_jobs])
    cands: dict[int, tuple[CellEstimate, ...]] = {}

    def top(i: int) -> tuple[CellEstimate, ...]:
        if i not in cands:
            job = recs[i].job
            cands[i] = selector.cells(job.model, job.global_batch)
        return cands[i]

    rest = waiting[cfg.head_jobs :]
    room = cfg.window_jobs - len(chosen)
    if room > 0 and rest:
        picked: list[int] = []
        for i in rest:  # the earliest later jobs that can start now
            if any(index.fits(c.cell) for c in top(i)):
                picked.append(i)
                if len(picked) == room:
                    break
        if len(picked) < room:  # fill with the next blocked jobs
            taken = set(picked)
            picked += [i for i in rest if i not in taken][: room - len(picked)]
            picked.sort()
        chosen += picked
    return [recs[i] for i in chosen], [top(i) for i in chosen]


def build_decision_state(
    sim: Simulator, cfg: EnvConfig, selector: CellSelector, acted: frozenset[int] = frozenset()
) -> DecisionState:
    """The decision state of the simulator now.

    ``acted``: trace indices of jobs already started, moved or preempted at this instant; they
    get no further action until time moves (one change per job per instant, as in Crius —
    otherwise a policy could reconfigure, or preempt and restart, forever without time
    passing). Preemption is offered only while some job waits: it can only help by freeing
    GPUs for a waiting job.
    """
    k, c, r = cfg.window_jobs, cfg.cells_per_job, cfg.running_jobs
    index = FitIndex(sim.allocator)
    window, cells = _select_window(sim, cfg, index, selector)
    fits = np.zeros((k, c), dtype=bool)
    for i, cs in enumerate(cells):
        if window[i].index in acted:
            continue  # preempted at this instant: no restart until time moves
        for j, ce in enumerate(cs):
            fits[i, j] = index.fits(ce.cell)
    running: list[JobRecord] = []
    run_cells: list[tuple[CellEstimate, ...]] = []
    run_valid = np.zeros((r, c + 1), dtype=bool)
    if cfg.reconfigure:
        recs = sim.records
        for row, i in enumerate(sim.active_indices[:r]):
            rec = recs[i]
            running.append(rec)
            cs = selector.cells(rec.job.model, rec.job.global_batch)
            run_cells.append(cs)
            assert rec.placement is not None
            if i in acted:
                continue
            for j, ce in enumerate(cs):
                run_valid[row, j] = ce.cell != rec.cell and index.fits_after_release(
                    ce.cell, rec.placement
                )
            # Preempting only helps a waiting job (it frees GPUs for it).
            run_valid[row, c] = bool(sim.waiting_indices)
    mask = np.zeros(cfg.num_actions, dtype=bool)
    mask[: k * c] = fits.reshape(-1)
    if cfg.reconfigure:
        mask[k * c : k * c + r * (c + 1)] = run_valid.reshape(-1)
    wait_valid = sim.has_future_events
    mask[-1] = wait_valid
    return DecisionState(
        now_s=sim.now_s,
        window=window,
        cells=cells,
        fits=fits,
        running=running,
        run_cells=run_cells,
        run_valid=run_valid,
        waiting_total=len(sim.waiting_indices),
        wait_valid=wait_valid,
        mask=mask,
    )
