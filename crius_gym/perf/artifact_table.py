"""The Crius/Arena artifact's oracle table of iteration times, with the artifact's fallbacks.

The artifact's simulator knows job speeds only from its profiling database
(``database/prof_database.pkl``, key ``"optimal"``: the Alpa-tuned best plan per (model, batch,
GPU type, nodes × GPUs per node); the same 329 entries as ``arena/measured_iteration_times.csv``).
Its lookup, ``db_querier.py::DatabaseQuerier.query_db`` (``only_opt`` branch and
``__gen_l1_l2_keys``), answers a configuration in this order:

1. the entry itself; ``-1`` (here: a row measured ``oom``) means out of memory;
2. a layout that is not in the table (a *relaxed* layout with fewer GPUs per node) is priced at
   the type's best layout (one node, or full nodes) with the throughput scaled by
   ``LOCALITY_SCALE_FACTOR = 0.9`` per halving of GPUs per node;
3. a model that is not in the table at that layout is priced as the next *larger* measured size
   of its family at the same layout, the throughput scaled by ``PARAM_NUM_SCALE_FACTOR = 1.8``
   per size step (sizes in ``resources/hardware_specs.py::supported_model_cfgs`` order);
4. anything else is infeasible, and so is an entry above one scheduling round (300 s,
   ``__valid_iter_time``).

:class:`TableTuner` puts the table behind the :class:`~crius_gym.perf.tuner.Tuner` interface, so
that what the scheduler sees (Cells, ranking, plans of any layout) and what the simulator runs at
(:class:`~crius_gym.sim.truth.ArtifactTableTruth`) are both the table, as in the artifact's runs
with ``--sched_with_opt``. The table has no plan: constrained queries (data parallelism only) read
the tuned optimum too, as the artifact's ``only_dp`` branch does when the database has no
``"all"`` table, and a Cell's plan and time breakdown are the estimator's, rescaled to the table's
time (one stage, all compute, where the estimator finds no plan).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace

from crius_gym.errors import ConfigError
from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.cell import Cell, CellEstimate
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.measurements import Measurement
from crius_gym.perf.plan import Breakdown, Layout, Plan, PlanConstraints, PlanEstimate
from crius_gym.perf.tuner import SearchStats, Tuner, TunerConfig, TunerResult, layouts_for
from crius_gym.workload.models import ModelSpec

#: ``resources/hardware_specs.py::supported_model_cfgs`` — each family's sizes, smallest first.
ARTIFACT_MODEL_SIZES: Mapping[str, tuple[str, ...]] = {
    "wide_resnet": ("500M", "1B", "2B", "4B", "6.8B", "13B"),
    "bert": ("760M", "1.3B", "2.6B", "6.7B", "15B", "39B"),
    "moe": ("690M", "1.3B", "2.4B", "10B", "27B", "70B"),
}
#: ``macro/macro_def.py``: throughput factor per halving of GPUs per node (relaxed layouts).
LOCALITY_SCALE_FACTOR = 0.9
#: ``macro/macro_def.py``: throughput factor per step down to a smaller model size.
PARAM_NUM_SCALE_FACTOR = 1.8
#: ``__valid_iter_time``: an entry above one scheduling round (``SCHEDULING_INTERVAL``) is invalid.
MAX_VALID_ITER_TIME_S = 300.0

_OOM = -1.0
_TableKey = tuple[str, int, str, Layout]


def _size_name(family: str, size: str) -> str:
    return f"{family}-{size.lower()}"


class ArtifactTable:
    """Iteration times as the artifact's simulator looks them up (see the module docstring).

    Args:
        measurements: rows of the Arena measured table (framework ``alpa``; ``oom`` rows are the
            table's ``-1`` entries; other frameworks are ignored).
        node_capacity: GPUs per node of each GPU type (the artifact's ``NODE_CAPACITY``), which
            defines a type's best layout.
        max_valid_iter_time_s: entries above this are invalid (the artifact: one round).

    Raises:
        ConfigError: no Alpa row in ``measurements``.
    """

    def __init__(
        self,
        measurements: Iterable[Measurement],
        node_capacity: Mapping[str, int],
        max_valid_iter_time_s: float = MAX_VALID_ITER_TIME_S,
    ) -> None:
        self._entries: dict[_TableKey, float] = {}
        for m in measurements:
            if m.framework != "alpa":
                continue
            value = m.measured_s if m.status == "ok" and m.measured_s is not None else _OOM
            self._entries[(m.model_name, m.global_batch, m.gpu_type, m.layout)] = value
        if not self._entries:
            raise ConfigError("the artifact table needs the Arena (alpa) measurements")
        self.node_capacity = dict(node_capacity)
        self.max_valid_iter_time_s = max_valid_iter_time_s
        self._order: dict[str, tuple[str, tuple[str, ...]]] = {
            _size_name(fam, s): (fam, sizes)
            for fam, sizes in ARTIFACT_MODEL_SIZES.items()
            for s in sizes
        }

    def __len__(self) -> int:
        return len(self._entries)

    def best_layout(self, gpu_type: str, num_gpus: int) -> Layout:
        """The artifact's best locality: one node up to a node's capacity, else full nodes."""
        cap = self.node_capacity[gpu_type]
        return Layout(1, num_gpus) if num_gpus <= cap else Layout(num_gpus // cap, cap)

    def _key(
        self, model_name: str, batch: int, gpu_type: str, layout: Layout
    ) -> tuple[float, float] | None:
        """The artifact's key lookup with its two fallbacks: (entry, throughput factor)."""
        exact = self._entries.get((model_name, batch, gpu_type, layout))
        if exact is not None:
            return exact, 1.0
        best = self.best_layout(gpu_type, layout.num_gpus)
        relaxed = self._entries.get((model_name, batch, gpu_type, best))
        if relaxed is not None:
            # Relaxed locality: throughput x0.9 per halving of GPUs per node.
            steps = int(math.log2(best.gpus_per_node // layout.gpus_per_node))
            return relaxed, LOCALITY_SCALE_FACTOR**steps
        if model_name in self._order:
            family, sizes = self._order[model_name]
            idx = sizes.index(next(s for s in sizes if _size_name(family, s) == model_name))
            for k, size in enumerate(sizes[idx + 1 :], start=1):
                larger = self._entries.get((_size_name(family, size), batch, gpu_type, layout))
                if larger is not None:
                    # A larger measured model: throughput x1.8 per size step.
                    return larger, PARAM_NUM_SCALE_FACTOR**k
        return None

    def iter_time_s(
        self, model_name: str, global_batch: int, gpu_type: str, layout: Layout
    ) -> float | None:
        """Seconds per iteration of the tuned optimum, or None (OOM, invalid or not in table).

        As in the artifact, the entry found is checked (OOM, above one round) before the
        fallback's factor is applied.
        """
        found = self._key(model_name, global_batch, gpu_type, layout)
        if found is None:
            return None
        entry, factor = found
        if entry <= 0 or entry > self.max_valid_iter_time_s:
            return None
        return entry / factor


class TableTuner(Tuner):
    """A tuner whose prices are the artifact's table (see the module docstring).

    Cells are enumerated as the estimator-backed tuner does (power-of-two counts up to
    ``max_gpus``, every uniform layout); a Cell is feasible when the table prices it, and GPU
    dominance prunes as usual. Stage counts come from the estimator's plan (1 where it has none).

    Args:
        cluster: the cluster.
        estimator: gives each Cell's plan shape and breakdown (never its time or feasibility).
        table: the artifact's table.
        config: tuner settings.
    """

    def __init__(
        self,
        cluster: ClusterSpec,
        estimator: Estimator,
        table: ArtifactTable,
        config: TunerConfig | None = None,
    ) -> None:
        super().__init__(cluster, estimator, config)
        self.table = table
        self._table_cache: dict[tuple[ModelSpec, int, str, Layout], PlanEstimate | None] = {}

    def best_in_layout(
        self,
        model: ModelSpec,
        global_batch: int,
        gpu_type: str,
        layout: Layout,
        constraints: PlanConstraints | None = None,
    ) -> PlanEstimate | None:
        """The table's time of a layout (constraints read the same tuned optimum)."""
        key = (model, global_batch, gpu_type, layout)
        if key in self._table_cache:
            self.cache_hits += 1
            return self._table_cache[key]
        self.cache_misses += 1
        t = self.table.iter_time_s(model.name, global_batch, gpu_type, layout)
        result = None if t is None else self._priced(model, global_batch, gpu_type, layout, t)
        self._table_cache[key] = result
        return result

    def _priced(
        self, model: ModelSpec, batch: int, gpu_type: str, layout: Layout, t: float
    ) -> PlanEstimate:
        """The estimator's plan of the layout carrying the table's time."""
        est = super().best_in_layout(model, batch, gpu_type, layout)
        limit = self.cluster.group(gpu_type).gpu.memory_gb * (
            self.estimator.framework.usable_memory_fraction
        )
        if est is None:
            plan = Plan(pipeline=1, data=layout.num_gpus, tensor=1, microbatches=1)
            return PlanEstimate(plan, t, 0.0, limit, Breakdown(t, 0, 0, 0, 0, 0, 0))
        f = t / est.iter_time_s
        b = est.breakdown
        scaled = Breakdown(
            b.compute_s * f,
            b.intra_stage_comm_s * f,
            b.cross_stage_comm_s * f,
            b.bubble_s * f,
            b.grad_sync_s * f,
            b.optimizer_s * f,
            b.overhead_s * f,
        )
        return replace(est, iter_time_s=t, breakdown=scaled)

    def _tune(self, model: ModelSpec, batch: int) -> TunerResult:
        cfg = self.config
        kept: list[CellEstimate] = []
        enumerated = infeasible = dominated = 0
        for group in self.cluster.groups:
            best_smaller = 0.0
            n = 1
            while n <= min(cfg.max_gpus, group.num_gpus):
                this_n: list[CellEstimate] = []
                for lay in layouts_for(group, n):
                    enumerated += 1
                    est = self.best_in_layout(model, batch, group.gpu_type, lay)
                    if est is None:
                        infeasible += 1
                        continue
                    cell = Cell(group.gpu_type, lay, est.plan.pipeline)
                    this_n.append(CellEstimate(cell, batch, est, 1))
                for ce in this_n:
                    if best_smaller and ce.throughput < best_smaller * (
                        1 + cfg.dominance_threshold
                    ):
                        dominated += 1
                    else:
                        kept.append(ce)
                if this_n:
                    best_smaller = max(best_smaller, *(ce.throughput for ce in this_n))
                n *= 2
        kept.sort(key=lambda ce: (-ce.throughput, ce.num_gpus, ce.cell))
        if cfg.max_candidates is not None:
            kept = kept[: cfg.max_candidates]
        stats = SearchStats(
            cells_enumerated=enumerated,
            cells_pruned_memory=0,
            cells_pruned_compute=0,
            cells_infeasible=infeasible,
            cells_dominated=dominated,
            plans_priced=enumerated,
            plans_exhaustive=enumerated,
            plans_joint=enumerated,
        )
        return TunerResult(model=model, global_batch=batch, candidates=tuple(kept), stats=stats)
