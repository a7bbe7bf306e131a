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

import math
from dataclasses import dataclass

import numpy as np
from gymnasium import spaces

from crius_gym.env.config import EnvConfig
from crius_gym.env.decision import DecisionState
from crius_gym.perf.cell import Cell, CellEstimate
from crius_gym.perf.layers import model_costs
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
)


_LOG_CAP = math.log1p(1000.0)


@dataclass(frozen=True)
class _CellBlock:
    """Cached static features of a job's candidate Cells, with what the dynamic ones need."""

    cells: tuple[CellEstimate, ...]
    rows: np.ndarray  # (len(cells), features), dynamic columns zero
    iter_times: np.ndarray  # estimated seconds per iteration of each Cell
    type_slot: np.ndarray  # index of each Cell's GPU type in the cluster's type list
    slot_of: dict[Cell, int]  # position of each Cell in the list


def _log_norm(x: float, scale: float) -> float:
    """A duration or size mapped into [0, 1]: log1p(x / scale) / log1p(1000)."""
    return min(1.0, math.log1p(max(0.0, x) / scale) / math.log1p(1000.0))


class ObservationEncoder:
    """Builds observations for one environment (cluster and time scale fixed).

    Args:
        cfg: environment settings.
        sim: the simulator (its cluster gives the GPU types, in group order).
        time_scale_s: the duration mapped to log1p(1) (the reward scale).
    """

    def __init__(self, cfg: EnvConfig, sim: Simulator, time_scale_s: float) -> None:
        self.cfg = cfg
        self.sim = sim
        self.time_scale_s = time_scale_s
        self.types = list(sim.cluster.gpu_types)[: cfg.max_gpu_types]
        self.type_index = {t: i for i, t in enumerate(self.types)}
        self.n_cell = len(CELL_FEATURES_BASE) + cfg.max_gpu_types
        self.total_gpus = sim.cluster.num_gpus
        self._tuning_cap = max(1.0, sim.tuner.config.full_overhead_cap_s)
        self._static: dict[tuple[int, int], _CellBlock] = {}
        self._static_jobs: dict[tuple[str, int, int, int], np.ndarray] = {}
        self._ranges = [np.arange(n) for n in range(cfg.cells_per_job + 1)]
        self._all_types = list(sim.cluster.gpu_types)
        self._type_slot = {t: i for i, t in enumerate(self._all_types)}
        self._type_sizes = [
            (
                t,
                sim.cluster.group(t).num_gpus,
                sim.cluster.group(t).num_nodes,
                sim.cluster.group(t).gpus_per_node,
            )
            for t in self.types
        ]
        self._cluster_static = np.zeros((cfg.max_gpu_types, len(TYPE_FEATURES)), np.float32)
        for t, name in enumerate(self.types):
            g = sim.cluster.group(name)
            row = self._cluster_static[t]
            row[0] = 1.0
            row[3] = g.num_gpus / self.total_gpus
            row[4] = min(1.0, g.gpu.fp16_tflops / 1000.0)
            row[5] = min(1.0, g.gpu.memory_gb / 160.0)
            row[6] = min(1.0, g.gpus_per_node / 16.0)
        self.space = self._space()

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
        key = (
            job.model.name,
            job.global_batch,
            job.requested_gpus or 0,
            id(cells[0]) if cells else 0,
        )
        hit = self._static_jobs.get(key)
        if hit is not None:
            return hit
        out = np.zeros(len(JOB_FEATURES), dtype=np.float32)
        family = job.model.family
        best = cells[0] if cells else None
        out[0] = 1.0
        out[4] = math.log2(1 + (job.requested_gpus or 0)) / 5.0
        out[5] = family in ("bert", "gpt", "llama")
        out[6] = family == "moe"
        out[7] = family == "wide_resnet"
        out[8] = min(1.0, math.log10(1.0 + model_costs(job.model).params) / 13.0)
        out[9] = min(1.0, math.log2(job.global_batch) / 13.0)
        out[11] = min(1.0, len(cells) / self.cfg.cells_per_job)
        out[12] = min(1.0, math.log1p(best.throughput) / 10.0) if best else 0.0
        self._static_jobs[key] = out
        return out

    def _job_row(
        self,
        out: np.ndarray,
        rec: JobRecord,
        cells: tuple[CellEstimate, ...],
        fits: np.ndarray,
        position: float,
    ) -> None:
        job = rec.job
        now = self.sim.now_s
        best = cells[0] if cells else None
        remaining = job.iterations - rec.progress_at(now)
        out[:] = self._static_job(job, cells)
        out[1] = _log_norm(now - job.arrival_s, self.time_scale_s)
        out[2] = _log_norm(remaining * best.iter_time_s, self.time_scale_s) if best else 1.0
        out[3] = 1.0 - remaining / job.iterations
        out[10] = float(fits.sum()) / self.cfg.cells_per_job
        out[13] = position
        if rec.cell is not None:
            out[14] = math.log2(1 + rec.cell.num_gpus) / 5.0
            if best and rec.estimated_iter_time_s > 0:
                out[15] = min(1.0, best.iter_time_s / rec.estimated_iter_time_s)

    def _static_cells(self, cells: tuple[CellEstimate, ...]) -> _CellBlock:
        """Features of a job's candidate Cells that depend only on (model, batch, Cell)."""
        # The tuner caches its results, so the first CellEstimate's identity names the list.
        key = (id(cells[0]), len(cells))
        hit = self._static.get(key)
        if hit is not None and hit.cells[0] is cells[0]:
            return hit
        out = np.zeros((len(cells), self.n_cell), dtype=np.float32)
        best_t = cells[0].iter_time_s
        best_per_gpu = max(ce.throughput / ce.num_gpus for ce in cells)
        cap = self._tuning_cap
        for j, ce in enumerate(cells):
            cell, bd, row = ce.cell, ce.best.breakdown, out[j]
            total = max(bd.total_s, 1e-12)
            row[0] = 1.0
            row[2] = math.log2(cell.num_gpus) / 4.0
            row[3] = math.log2(cell.layout.num_nodes) / 5.0
            row[4] = math.log2(cell.stages) / 4.0
            row[5] = min(1.0, best_t / ce.iter_time_s)
            row[6] = min(1.0, (ce.throughput / cell.num_gpus) / best_per_gpu)
            row[8] = min(1.0, ce.best.memory_gb / ce.best.memory_limit_gb)
            row[9] = bd.compute_s / total
            row[10] = bd.communication_s / total
            row[11] = bd.bubble_s / total
            row[13] = min(1.0, self.sim.tuner.config.tuning_overhead_s(cell.num_gpus, True) / cap)
            row[14] = j / self.cfg.cells_per_job
            t = self.type_index.get(cell.gpu_type)
            if t is not None:
                row[len(CELL_FEATURES_BASE) + t] = 1.0
        block = _CellBlock(
            cells=cells,
            rows=out,
            iter_times=np.array([ce.iter_time_s for ce in cells]),
            type_slot=np.array([self._type_slot[ce.cell.gpu_type] for ce in cells]),
            slot_of={ce.cell: j for j, ce in enumerate(cells)},
        )
        self._static[key] = block
        return block

    def _job_block(
        self,
        recs: list[JobRecord],
        cells: list[tuple[CellEstimate, ...]],
        valid: np.ndarray,
        rows: int,
        type_free: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        c = self.cfg.cells_per_job
        jobs = np.zeros((rows, len(JOB_FEATURES)), dtype=np.float32)
        cell_obs = np.zeros((rows * c, self.n_cell), dtype=np.float32)
        n = max(1, len(recs))
        now = self.sim.now_s
        blocks, where, left = [], [], []
        for i, (rec, cs) in enumerate(zip(recs, cells, strict=True)):
            self._job_row(jobs[i], rec, cs, valid[i, :c], i / n)
            if not cs:
                continue
            block = self._static_cells(cs)
            blocks.append(block)
            where.append(self._ranges[len(cs)] + i * c)
            left.append(rec.job.iterations - rec.progress_at(now))
            if rec.cell is not None:  # mark the Cell the running job is on
                j = block.slot_of.get(rec.cell)
                if j is not None:
                    cell_obs[i * c + j, 15] = 1.0
        if not blocks:
            return jobs, cell_obs
        idx = np.concatenate(where)
        current = cell_obs[idx, 15]
        cell_obs[idx] = np.concatenate([b.rows for b in blocks])
        cell_obs[idx, 1] = valid[:, :c].reshape(-1)[idx]  # running blocks have a preempt column
        remaining = np.repeat(np.array(left), [len(b.cells) for b in blocks])
        times = np.concatenate([b.iter_times for b in blocks]) * remaining
        cell_obs[idx, 7] = np.minimum(1.0, np.log1p(times / self.time_scale_s) / _LOG_CAP)
        cell_obs[idx, 12] = type_free[np.concatenate([b.type_slot for b in blocks])]
        cell_obs[idx, 15] = current
        return jobs, cell_obs

    def _cluster(self, state: DecisionState) -> np.ndarray:
        out = self._cluster_static.copy()
        alloc = self.sim.allocator
        running_by_type: dict[str, int] = {}
        active = self.sim.active_indices
        records = self.sim.records
        for i in active:
            cell = records[i].cell
            if cell is not None:
                running_by_type[cell.gpu_type] = running_by_type.get(cell.gpu_type, 0) + 1
        n_active = max(1, len(active))
        for t, (name, gpus, nodes, per_node) in enumerate(self._type_sizes):
            free = alloc.free_per_node(name)
            row = out[t]
            row[1] = alloc.free_gpus(name) / gpus
            row[2] = float(np.count_nonzero(free == per_node)) / nodes
            row[7] = running_by_type.get(name, 0) / n_active
            row[8] = float(free.max()) / per_node
        return out

    def _globals(self, state: DecisionState, decisions_now: int) -> np.ndarray:
        sim = self.sim
        total_jobs = max(1, len(sim.records))
        waiting = state.waiting_total
        fitting = int(state.fits.any(axis=1).sum())
        return np.array(
            [
                math.log1p(waiting) / math.log1p(1000.0),
                (waiting - len(state.window)) / max(1, waiting),
                math.log1p(len(sim.active_indices)) / math.log1p(1000.0),
                sim.allocator.busy_gpus() / self.total_gpus,
                sim.future_arrivals / total_jobs,
                min(1.0, decisions_now / 16.0),
                fitting / max(1, len(state.window)),
                _log_norm(self.time_scale_s, 3600.0),
            ],
            dtype=np.float32,
        ).clip(0.0, 1.0)

    def encode(self, state: DecisionState, decisions_now: int) -> dict[str, np.ndarray]:
        """The observation of a decision state (fresh arrays on every call)."""
        cfg = self.cfg
        alloc = self.sim.allocator
        type_free = np.array([alloc.free_gpus(t) / alloc.total_gpus(t) for t in self._all_types])
        jobs, cells = self._job_block(
            state.window, state.cells, state.fits, cfg.window_jobs, type_free
        )
        obs: dict[str, np.ndarray] = {
            "jobs": jobs,
            "cells": cells,
            "cluster": self._cluster(state),
            "globals": self._globals(state, decisions_now),
        }
        if cfg.reconfigure:
            run, run_cells = self._job_block(
                state.running, state.run_cells, state.run_valid, cfg.running_jobs, type_free
            )
            obs["running"] = run
            obs["running_cells"] = run_cells
        flat = {key: np.clip(v.reshape(-1), 0.0, 1.0) for key, v in obs.items()}
        flat["action_mask"] = state.mask.astype(np.int8)
        return flat
