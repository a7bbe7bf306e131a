"""Observation encoding: a flat Dict of float32 boxes, normalised to known bounds.

Shapes depend only on :class:`EnvConfig` (K, C, R, the padded number of GPU types), never on
the cluster's size: counts are divided by the cluster's totals and durations pass through a
bounded log transform, so one trained policy runs on every scenario.

Keys (each a 1-D box holding a row-major table; :attr:`ObservationEncoder.row_shapes` gives
the (rows, features) of each; padded rows are zeros; feature 0 of a row is a "present" flag):

* ``jobs`` (K × F_JOB): the window of waiting jobs;
* ``cells`` (K·C × F_CELL): each window job's candidate Cells, with the estimator's numbers;
* ``running`` (R × F_JOB) and ``running_cells`` (R·C × F_CELL): only with ``reconfigure``;
* ``cluster`` (G × F_TYPE): per-GPU-type state, padded to ``max_gpu_types``;
* ``globals`` (F_GLOBAL): backlog beyond the window and other cluster-wide numbers;
* ``action_mask`` (A) int8: the same mask as ``action_masks()``.

Tables are flattened because SB3 treats multi-dimensional boxes as images or warns about them.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence

import numpy as np
from gymnasium import spaces

from crius_gym.env.config import EnvConfig
from crius_gym.env.decision import CandidateArrays, DecisionState
from crius_gym.env.guide import GuidePlan
from crius_gym.errors import ConfigError
from crius_gym.perf.cell import CellEstimate
from crius_gym.perf.layers import model_costs
from crius_gym.sim.actions import Preempt, Reconfigure, Start
from crius_gym.sim.records import JobRecord
from crius_gym.sim.simulator import Simulator
from crius_gym.workload.job import Job

JOB_FEATURES = (
    "present",
    "waited",
    "remaining_work",
    "progress",
    "requested_gpus",
    "family_transformer",
    "family_moe",
    "family_conv",
    "params",
    "batch",
    "fitting_cells",
    "candidate_cells",
    "best_throughput",
    "queue_position",
    "current_gpus",
    "current_speed",
    "guide_acts",
    "guide_preempts",
)
CELL_FEATURES_BASE = (
    "present",
    "fits",
    "num_gpus",
    "num_nodes",
    "stages",
    "relative_speed",
    "gpu_efficiency",
    "run_time",
    "memory",
    "compute_share",
    "comm_share",
    "bubble_share",
    "type_free",
    "tuning_pause",
    "rank",
    "is_current",
    "guide_next",
    "guide_plan",
)
TYPE_FEATURES = (
    "present",
    "free",
    "free_nodes",
    "share",
    "peak_fp16",
    "memory",
    "node_size",
    "running_share",
    "largest_free_block",
)
GLOBAL_FEATURES = (
    "waiting",
    "beyond_window",
    "running",
    "busy",
    "future_arrivals",
    "decisions_now",
    "fitting_share",
    "time_scale",
    "guide_wait",
    "guide_plan_left",
)


class _Columns:
    """Column of each feature of a table, by name: ``_J.requested_gpus`` is 4.

    Indices come from the name tuples above, so reordering or adding a feature never leaves a
    stale number behind; a misspelt name fails on first use.
    """

    def __init__(self, names: tuple[str, ...]) -> None:
        for i, name in enumerate(names):
            setattr(self, name, i)

    def __getattr__(self, name: str) -> int:  # only reached for unknown names
        raise AttributeError(f"no feature column {name!r}")


_J = _Columns(JOB_FEATURES)
_C = _Columns(CELL_FEATURES_BASE)
_T = _Columns(TYPE_FEATURES)
_G = _Columns(GLOBAL_FEATURES)


_LOG_CAP = math.log1p(1000.0)
#: Job features that change with time (their columns, from the names).
_DYNAMIC_JOB_COLUMNS = np.array(
    [
        getattr(_J, name)
        for name in (
            "waited",
            "remaining_work",
            "progress",
            "queue_position",
            "current_gpus",
            "current_speed",
        )
    ]
)
#: Columns of the guide's proposal (zero unless the env shows the hint).
JOB_GUIDE_ACTS, JOB_GUIDE_PREEMPTS = _J.guide_acts, _J.guide_preempts
CELL_GUIDE_NEXT, CELL_GUIDE_PLAN = _C.guide_next, _C.guide_plan
GLOBAL_GUIDE_WAIT, GLOBAL_GUIDE_PLAN_LEFT = _G.guide_wait, _G.guide_plan_left
#: GPU-type features that change with time (their columns, from the names).
_DYNAMIC_TYPE_COLUMNS = np.array(
    [getattr(_T, name) for name in ("free", "free_nodes", "running_share", "largest_free_block")]
)


class _EpisodeTables:
    """Static rows of one episode's jobs, by kind and trace index.

    Kind 0 holds a job's rows as a waiting job, kind 1 as a running job (the two show different
    candidate lists). One fancy index gathers the rows of every job shown.
    """

    def __init__(self, records: Sequence[JobRecord], cells_per_job: int, cell_features: int):
        n = len(records)
        self.records = records
        self.jobs = np.zeros((2, n, len(JOB_FEATURES)), dtype=np.float32)
        self.cells = np.zeros((2, n, cells_per_job, cell_features), dtype=np.float32)
        self.iter_times = np.zeros((2, n, cells_per_job))
        self.type_slot = np.zeros((2, n, cells_per_job), dtype=np.intp)
        # The candidate tuple each row was filled from (None: not yet); a guide's planned Cell
        # can change a job's candidates, which refills its rows.
        self.filled: list[list[tuple[CellEstimate, ...] | None]] = [[None] * n, [None] * n]


def _log_norm(x: float, scale: float) -> float:
    """A duration or size mapped into [0, 1]: log1p(x / scale) / log1p(1000)."""
    return min(1.0, math.log1p(max(0.0, x) / scale) / _LOG_CAP)


#: The duration mapped to log1p(1) in scale-free observations (EnvConfig.scale_free), seconds.
SCALE_FREE_TIME_S = 3600.0


class ObservationEncoder:
    """Builds observations for one environment (cluster and time scale fixed).

    Args:
        cfg: environment settings.
        sim: the simulator (its cluster gives the GPU types, in group order).
        time_scale_s: the duration mapped to log1p(1) (the reward scale); with
            ``cfg.scale_free`` one hour, and the reward scale enters only as the arrival gap
            per 64 GPUs (the time-scale feature).
    """

    def __init__(self, cfg: EnvConfig, sim: Simulator, time_scale_s: float) -> None:
        self.cfg = cfg
        self.sim = sim
        gpus = sim.cluster.num_gpus
        self.time_scale_s = SCALE_FREE_TIME_S if cfg.scale_free else time_scale_s
        self._scale_feature_s = time_scale_s * gpus / 64.0 if cfg.scale_free else time_scale_s
        #: Jobs are counted per this many of the cluster's (per 64 GPUs when scale-free).
        self._count_unit = gpus / 64.0 if cfg.scale_free else 1.0
        if len(sim.cluster.gpu_types) > cfg.max_gpu_types:
            # Truncating would hide the extra types from the agent (and their Cells' features).
            raise ConfigError(
                f"env: the cluster has {len(sim.cluster.gpu_types)} GPU types "
                f"({', '.join(sim.cluster.gpu_types)}) but max_gpu_types is "
                f"{cfg.max_gpu_types}; raise env.max_gpu_types"
            )
        self.types = list(sim.cluster.gpu_types)
        self.type_index = {t: i for i, t in enumerate(self.types)}
        self.n_cell = len(CELL_FEATURES_BASE) + cfg.max_gpu_types
        self.total_gpus = sim.cluster.num_gpus
        self._tuning_cap = max(1.0, sim.tuner.config.full_overhead_cap_s)
        self._static: dict[int, tuple[tuple[CellEstimate, ...], np.ndarray]] = {}
        self._static_jobs: dict[tuple[str, int, int, int], np.ndarray] = {}
        self._all_types = list(sim.cluster.gpu_types)
        groups = [sim.cluster.group(t) for t in self.types]
        self._per_node = [g.gpus_per_node for g in groups]
        self._nodes = [g.num_nodes for g in groups]
        self._cluster_static = np.zeros((cfg.max_gpu_types, len(TYPE_FEATURES)), np.float32)
        for t, g in enumerate(groups):
            row = self._cluster_static[t]
            row[_T.present] = 1.0
            row[_T.share] = g.num_gpus / self.total_gpus
            row[_T.peak_fp16] = min(1.0, g.gpu.fp16_tflops / 1000.0)
            row[_T.memory] = min(1.0, g.gpu.memory_gb / 160.0)
            row[_T.node_size] = min(1.0, g.gpus_per_node / 16.0)
        self.space = self._space()
        # Every table's slice of the one observation buffer: key -> (start, stop, shape). Job
        # tables first (window, running), then Cell tables (same order), so each pair is one
        # contiguous block; the returned dict keeps the order of ``row_shapes``.
        shapes = self.row_shapes
        order = ["jobs", "running", "cells", "running_cells", "cluster", "globals"]
        offsets: dict[str, tuple[int, int, tuple[int, int]]] = {}
        offset = 0
        for key in order:
            if key in shapes:
                rows, cols = shapes[key]
                offsets[key] = (offset, offset + rows * cols, shapes[key])
                offset += rows * cols
        self._layout = {key: offsets[key] for key in shapes}
        self._size = offset
        self._tables: _EpisodeTables | None = None

    @property
    def cell_features(self) -> tuple[str, ...]:
        """Names of the Cell feature columns (GPU-type one-hot last)."""
        return (*CELL_FEATURES_BASE, *(f"type{i}" for i in range(self.cfg.max_gpu_types)))

    @property
    def row_shapes(self) -> dict[str, tuple[int, int]]:
        """(rows, features) of each table key."""
        cfg = self.cfg
        k, c, r, g = cfg.window_jobs, cfg.cells_per_job, cfg.running_jobs, cfg.max_gpu_types
        shapes = {
            "jobs": (k, len(JOB_FEATURES)),
            "cells": (k * c, self.n_cell),
            "cluster": (g, len(TYPE_FEATURES)),
            "globals": (1, len(GLOBAL_FEATURES)),
        }
        if cfg.reconfigure:
            shapes["running"] = (r, len(JOB_FEATURES))
            shapes["running_cells"] = (r * c, self.n_cell)
        return shapes

    @property
    def columns(self) -> dict[str, tuple[str, ...]]:
        """Feature names of each table key, in column order (the keys of :attr:`row_shapes`)."""
        names = {
            "jobs": JOB_FEATURES,
            "cells": self.cell_features,
            "cluster": TYPE_FEATURES,
            "globals": GLOBAL_FEATURES,
            "running": JOB_FEATURES,
            "running_cells": self.cell_features,
        }
        return {key: names[key] for key in self.row_shapes}

    def tables(self, observation: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """An observation's tables as (rows, features) arrays (views, no copy).

        Args:
            observation: one observation of this encoder's space (``action_mask`` is dropped).

        Raises:
            ValueError: a table is missing or has the wrong size, naming it.
        """
        out = {}
        for key, (rows, cols) in self.row_shapes.items():
            flat = np.asarray(observation.get(key))
            if flat.shape != (rows * cols,):
                raise ValueError(
                    f"observation table {key!r}: expected {rows * cols} values "
                    f"({rows} rows x {cols} features), got shape {flat.shape}"
                )
            out[key] = flat.reshape(rows, cols)
        return out

    def _space(self) -> spaces.Dict:
        d: dict[str, spaces.Space] = {
            key: spaces.Box(0.0, 1.0, shape=(rows * cols,), dtype=np.float32)
            for key, (rows, cols) in self.row_shapes.items()
        }
        d["action_mask"] = spaces.MultiBinary(self.cfg.num_actions)
        return spaces.Dict(d)

    # ------------------------------------------------------------------ rows
    def _static_job(self, job: Job, cells: tuple[CellEstimate, ...]) -> np.ndarray:
        """Job features that depend only on (model, batch, request, candidates): cached."""
        # The selector keeps one candidate tuple per (model, batch, waiting/running), so the
        # tuple's identity names the candidates.
        key = (job.model.name, job.global_batch, job.requested_gpus or 0, id(cells))
        hit = self._static_jobs.get(key)
        if hit is not None:
            return hit
        out = np.zeros(len(JOB_FEATURES), dtype=np.float32)
        family = job.model.family
        best = cells[0] if cells else None
        out[_J.present] = 1.0
        out[_J.requested_gpus] = math.log2(1 + (job.requested_gpus or 0)) / 5.0
        out[_J.family_transformer] = family in ("bert", "gpt", "llama")
        out[_J.family_moe] = family == "moe"
        out[_J.family_conv] = family == "wide_resnet"
        out[_J.params] = min(1.0, math.log10(1.0 + model_costs(job.model).params) / 13.0)
        out[_J.batch] = min(1.0, math.log2(job.global_batch) / 13.0)
        out[_J.candidate_cells] = min(1.0, len(cells) / self.cfg.cells_per_job)
        out[_J.best_throughput] = min(1.0, math.log1p(best.throughput) / 10.0) if best else 0.0
        self._static_jobs[key] = out
        return out

    def for_simulator(self, sim: Simulator) -> ObservationEncoder:
        """This encoder reading another simulator of the same cluster (e.g. a rollout's copy).

        The caches of static rows (pure functions of jobs and Cells) are shared; the
        per-episode tables are rebuilt for the other simulator's records.
        """
        other = copy.copy(self)
        other.sim = sim
        other._tables = None
        return other

    def _episode_tables(self) -> _EpisodeTables:
        """Static rows of this episode's jobs, filled on first sight (a new trace resets them)."""
        if self._tables is None or self._tables.records is not self.sim.records:
            self._tables = _EpisodeTables(self.sim.records, self.cfg.cells_per_job, self.n_cell)
        return self._tables

    def _fill(
        self,
        tables: _EpisodeTables,
        kind: int,
        rec: JobRecord,
        cells: tuple[CellEstimate, ...],
        cands: CandidateArrays,
    ) -> None:
        i = rec.index
        tables.jobs[kind, i] = self._static_job(rec.job, cells)
        if cells:
            tables.cells[kind, i] = self._static_cells(cells)
        tables.iter_times[kind, i] = cands.iter_time_s
        tables.type_slot[kind, i] = cands.type_slot
        tables.filled[kind][i] = cells

    def _static_cells(self, cells: tuple[CellEstimate, ...]) -> np.ndarray:
        """Features of a job's candidate Cells that depend only on (model, batch, Cell).

        Returns a (C, F_CELL) table whose dynamic columns and padding rows are zero.
        """
        # The selector caches candidate tuples, so a tuple's identity names it.
        hit = self._static.get(id(cells))
        if hit is not None and hit[0] is cells:
            return hit[1]
        out = np.zeros((self.cfg.cells_per_job, self.n_cell), dtype=np.float32)
        best_t = cells[0].iter_time_s
        best_per_gpu = max(ce.throughput / ce.num_gpus for ce in cells)
        cap = self._tuning_cap
        for j, ce in enumerate(cells):
            cell, bd, row = ce.cell, ce.best.breakdown, out[j]
            total = max(bd.total_s, 1e-12)
            row[_C.present] = 1.0
            row[_C.num_gpus] = math.log2(cell.num_gpus) / 4.0
            row[_C.num_nodes] = math.log2(cell.layout.num_nodes) / 5.0
            row[_C.stages] = math.log2(cell.stages) / 4.0
            row[_C.relative_speed] = min(1.0, best_t / ce.iter_time_s)
            row[_C.gpu_efficiency] = min(1.0, (ce.throughput / cell.num_gpus) / best_per_gpu)
            row[_C.memory] = min(1.0, ce.best.memory_gb / ce.best.memory_limit_gb)
            row[_C.compute_share] = bd.compute_s / total
            row[_C.comm_share] = bd.communication_s / total
            row[_C.bubble_share] = bd.bubble_s / total
            pause_s = self.sim.tuner.config.tuning_overhead_s(cell.num_gpus, True)
            row[_C.tuning_pause] = min(1.0, pause_s / cap)
            row[_C.rank] = j / self.cfg.cells_per_job
            t = self.type_index.get(cell.gpu_type)
            if t is not None:
                row[len(CELL_FEATURES_BASE) + t] = 1.0
        self._static[id(cells)] = (cells, out)
        return out

    def _job_tables(
        self,
        state: DecisionState,
        jobs: np.ndarray,
        cell_obs: np.ndarray,
        valid: np.ndarray,
        type_free: np.ndarray,
    ) -> None:
        """Fill the job tables (window rows, then running rows) and their Cells.

        ``jobs``: (K [+ R], F_JOB) and ``cell_obs``: (K [+ R], C, F_CELL), zeros on entry;
        ``valid``: (jobs shown, C) whether each of their Cells can be chosen now, window jobs
        first. Static rows come from caches; the dynamic columns of all jobs are computed at
        once.
        """
        c, k = self.cfg.cells_per_job, self.cfg.window_jobs
        now = self.sim.now_s
        entries = [
            (0, rec, cs, cands, row / max(1, len(state.window)))
            for row, (rec, cs, cands) in enumerate(
                zip(state.window, state.cells, state.cell_arrays, strict=True)
            )
        ]
        if self.cfg.reconfigure:
            n_run = max(1, len(state.running))
            entries += [
                (1, rec, cs, cands, i / n_run)
                for i, (rec, cs, cands) in enumerate(
                    zip(state.running, state.run_cells, state.run_cell_arrays, strict=True)
                )
            ]
        if not entries:
            return
        scale = self.time_scale_s
        tables = self._episode_tables()
        filled = tables.filled
        kinds, indices, lefts = [], [], []
        dynamic = []  # per job, the columns _DYNAMIC_JOB_COLUMNS
        on_cell = []  # (entry, Cell slot) of each running job's current Cell
        for n, (kind, rec, cs, cands, pos) in enumerate(entries):
            job = rec.job
            if filled[kind][rec.index] is not cs:
                self._fill(tables, kind, rec, cs, cands)
            kinds.append(kind)
            indices.append(rec.index)
            left = job.iterations - rec.progress_at(now)
            lefts.append(left)
            best = cs[0].iter_time_s if cs else 0.0
            # A job without candidates has unknown remaining work: the maximum.
            work = _log_norm(left * best, scale) if cs else 1.0
            size = speed = 0.0
            if rec.cell is not None:  # a running job: its size, relative speed and Cell
                size = math.log2(1 + rec.cell.num_gpus) / 5.0
                estimated = rec.estimated_iter_time_s
                speed = min(1.0, best / estimated) if cs and estimated > 0 else 0.0
                j = cands.slot_of.get(rec.cell)
                if j is not None:
                    on_cell.append((n, j))
            waited = _log_norm(now - job.arrival_s, scale)
            dynamic.append((waited, work, 1.0 - left / job.iterations, pos, size, speed))
        n_window = len(state.window)
        at = (np.array(kinds), np.array(indices))
        static = tables.jobs[at]  # fancy indexing: fresh copies
        static[:, _DYNAMIC_JOB_COLUMNS] = np.array(dynamic)
        static[:, _J.fitting_cells] = valid.sum(axis=1) / c
        cells = tables.cells[at]
        cells[:, :, _C.fits] = valid
        run_time = tables.iter_times[at] * np.array(lefts)[:, None] / scale
        cells[:, :, _C.run_time] = np.minimum(1.0, np.log1p(run_time) / _LOG_CAP)
        cells[:, :, _C.type_free] = type_free[tables.type_slot[at]] * cells[:, :, _C.present]
        for n, j in on_cell:
            cells[n, j, _C.is_current] = 1.0
        plan = state.plan
        if plan is not None:
            self._guide_columns(plan, entries, static, cells)
        # Window jobs fill rows from 0, running jobs rows from K.
        jobs[:n_window] = static[:n_window]
        jobs[k : k + len(static) - n_window] = static[n_window:]
        cell_obs[:n_window] = cells[:n_window]
        cell_obs[k : k + len(cells) - n_window] = cells[n_window:]

    @staticmethod
    def _guide_columns(
        plan: GuidePlan,
        entries: list[tuple[int, JobRecord, tuple[CellEstimate, ...], CandidateArrays, float]],
        jobs: np.ndarray,
        cells: np.ndarray,
    ) -> None:
        """Mark the guide's plan: the jobs it acts on, their planned Cells, its next action."""
        nxt = plan.next
        nxt_job = plan.order[0] if plan.order else -1
        for n, (kind, rec, _, cands, _) in enumerate(entries):
            i = rec.index
            planned = (plan.starts if kind == 0 else plan.moves).get(i)
            acts = planned is not None or (kind == 1 and i in plan.preempts)
            if not acts:
                continue
            jobs[n, JOB_GUIDE_ACTS] = 1.0
            if kind == 1 and i == nxt_job and isinstance(nxt, Preempt):
                jobs[n, JOB_GUIDE_PREEMPTS] = 1.0
            j = cands.slot_of.get(planned) if planned is not None else None
            if j is not None:
                cells[n, j, CELL_GUIDE_PLAN] = 1.0
                is_next = isinstance(nxt, Start) if kind == 0 else isinstance(nxt, Reconfigure)
                if i == nxt_job and is_next:
                    cells[n, j, CELL_GUIDE_NEXT] = 1.0

    def _cluster(self, out: np.ndarray, state: DecisionState, type_free: np.ndarray) -> None:
        """Fill the per-GPU-type table (``max_gpu_types`` × F_TYPE, zeros on entry)."""
        g = len(self.types)
        slot = state.index.layout.slot
        running = [0] * len(self._all_types)
        records = self.sim.records
        active = self.sim.active_indices
        for i in active:
            cell = records[i].cell
            if cell is not None:
                running[slot[cell.gpu_type]] += 1
        n_active = max(1, len(active))
        values = []  # per type: free, free_nodes, running_share, largest_free_block
        for t, (row, per_node, nodes) in enumerate(
            zip(state.index.rows, self._per_node, self._nodes, strict=False)
        ):
            # row[n] = nodes with >= n free GPUs, non-increasing: the largest free block is
            # the last n with row[n] > 0.
            largest = per_node - row[1 : per_node + 1].count(0)
            values.append(
                (type_free[t], row[per_node] / nodes, running[t] / n_active, largest / per_node)
            )
        out[:] = self._cluster_static
        out[:g, _DYNAMIC_TYPE_COLUMNS] = values

    def _globals(self, out: np.ndarray, state: DecisionState, decisions_now: int) -> None:
        """Fill the cluster-wide features."""
        sim = self.sim
        total_jobs = max(1, len(sim.records))
        waiting = state.waiting_total
        fitting = state.fitting_jobs
        plan = state.plan
        unit = self._count_unit
        out[_G.waiting] = math.log1p(waiting / unit) / _LOG_CAP
        out[_G.beyond_window] = (waiting - len(state.window)) / max(1, waiting)
        out[_G.running] = math.log1p(len(sim.active_indices) / unit) / _LOG_CAP
        out[_G.busy] = sim.allocator.busy_gpus() / self.total_gpus
        if not self.cfg.scale_free:  # scale-free: the future is not observed
            out[_G.future_arrivals] = sim.future_arrivals / total_jobs
        out[_G.decisions_now] = min(1.0, decisions_now / 16.0)
        out[_G.fitting_share] = fitting / max(1, len(state.window))
        out[_G.time_scale] = _log_norm(self._scale_feature_s, 3600.0)
        out[_G.guide_wait] = float(plan is not None and plan.next is None)
        out[_G.guide_plan_left] = 0.0 if plan is None else min(1.0, len(plan.actions) / 16.0)

    def encode(self, state: DecisionState, decisions_now: int) -> dict[str, np.ndarray]:
        """The observation of a decision state (fresh arrays on every call).

        Every table is a view into one fresh buffer, filled in place and clipped to [0, 1] once;
        the window and running tables lie next to each other so one pass fills both.
        """
        cfg = self.cfg
        c = cfg.cells_per_job
        k = cfg.window_jobs + (cfg.running_jobs if cfg.reconfigure else 0)
        buf = np.zeros(self._size, dtype=np.float32)
        n_jobs = k * len(JOB_FEATURES)
        jobs = buf[:n_jobs].reshape(k, len(JOB_FEATURES))
        cell_obs = buf[n_jobs : n_jobs + k * c * self.n_cell].reshape(k, c, self.n_cell)
        valid = state.fits[: len(state.window)]
        if cfg.reconfigure:
            valid = np.concatenate([valid, state.run_valid[: len(state.running), :c]])
        alloc = self.sim.allocator
        type_free = np.array([alloc.free_gpus(t) / alloc.total_gpus(t) for t in self._all_types])
        self._job_tables(state, jobs, cell_obs, valid, type_free)
        start, stop, shape = self._layout["cluster"]
        self._cluster(buf[start:stop].reshape(shape), state, type_free)
        start, stop, _ = self._layout["globals"]
        self._globals(buf[start:stop], state, decisions_now)
        np.minimum(np.maximum(buf, 0.0, out=buf), 1.0, out=buf)  # clip, without its wrapper
        obs = {key: buf[start:stop] for key, (start, stop, _) in self._layout.items()}
        obs["action_mask"] = state.mask.astype(np.int8)
        return obs
