"""The Cell tuner: enumerate a job's Cells on every GPU type, price them, prune, rank.

For a (model, global batch) on a cluster, the tuner enumerates Cells as Crius does:
power-of-two GPU counts up to ``max_gpus`` (16 in Crius) in every uniform node layout the
node group allows, and pipeline stages in powers of two up to the GPU count (and the model's
partition units).  Each Cell's best plan comes from the estimator.  Then it prunes:

* **memory bound** — a Cell whose model states alone, split over every GPU, exceed usable memory
  is skipped without pricing a plan;
* **compute bound** — GPU counts are visited in increasing order; a Cell whose ideal time (all
  FLOPs at the GPU type's best efficiency, no communication) is already no better than the best
  smaller Cell of the same type, by the dominance threshold, is skipped;
* **stage dominance** — of the Cells of one (type, layout) only the fastest stage count is kept
  (the same GPUs, slower, is never worth choosing);
* **GPU dominance** — a Cell with more GPUs than another Cell of the same type but not at least
  ``dominance_threshold`` faster is dropped.

The survivors are ranked by estimated throughput (samples/s), ties broken by fewer GPUs.
Results are cached per (model, batch) inside a tuner instance; a tuner is bound to one cluster.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from crius_gym.errors import ConfigError
from crius_gym.hardware.cluster import ClusterSpec, NodeGroup
from crius_gym.perf.cell import Cell, CellEstimate
from crius_gym.perf.estimator import Estimator, optimizer_state_bytes, stage_costs
from crius_gym.perf.layers import model_costs
from crius_gym.perf.plan import Layout, PlanConstraints, PlanEstimate
from crius_gym.workload.models import ModelSpec


@dataclass(frozen=True)
class TunerConfig:
    """Tuner settings.

    Attributes:
        max_gpus: largest GPU count of a Cell (Crius: 16).
        dominance_threshold: a Cell with more GPUs must be at least this much faster (fraction)
            than every smaller Cell of its type to be kept.
        max_candidates: cap on the ranked list (None: every non-dominated Cell).
        pruned_overhead_s_per_gpu: tuning overhead per GPU when a job (re)starts on a Cell with
            the Cell-pruned search (Arena: 10 s).
        pruned_overhead_cap_s: cap of the pruned overhead (Arena: 40 s).
        full_overhead_s_per_gpu: overhead per GPU of an unpruned parallelism search (Arena: 150 s).
        full_overhead_cap_s: cap of the unpruned overhead (Arena: 600 s).
    """

    max_gpus: int = 16
    dominance_threshold: float = 0.05
    max_candidates: int | None = None
    pruned_overhead_s_per_gpu: float = 10.0
    pruned_overhead_cap_s: float = 40.0
    full_overhead_s_per_gpu: float = 150.0
    full_overhead_cap_s: float = 600.0

    def __post_init__(self) -> None:
        if self.max_gpus < 1 or self.max_gpus & (self.max_gpus - 1):
            raise ConfigError(f"tuner.max_gpus={self.max_gpus} must be a power of two >= 1")
        if not 0 <= self.dominance_threshold < 10:
            raise ConfigError("tuner.dominance_threshold must be in [0, 10)")
        if self.max_candidates is not None and self.max_candidates < 1:
            raise ConfigError("tuner.max_candidates must be >= 1 or null")
        for name in (
            "pruned_overhead_s_per_gpu",
            "pruned_overhead_cap_s",
            "full_overhead_s_per_gpu",
            "full_overhead_cap_s",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"tuner.{name} must be >= 0")

    def tuning_overhead_s(self, num_gpus: int, pruned: bool = True) -> float:
        """Seconds a job pauses to tune its plan when it (re)starts on ``num_gpus`` GPUs."""
        if pruned:
            return min(self.pruned_overhead_s_per_gpu * num_gpus, self.pruned_overhead_cap_s)
        return min(self.full_overhead_s_per_gpu * num_gpus, self.full_overhead_cap_s)


@dataclass(frozen=True)
class SearchStats:
    """What the tuner searched for one (model, batch).

    Attributes:
        cells_enumerated: Cells in the search space.
        cells_pruned_memory: skipped by the memory bound.
        cells_pruned_compute: skipped by the compute bound.
        cells_infeasible: priced but no plan fits in memory.
        cells_dominated: priced, feasible, dropped by stage or GPU dominance.
        plans_priced: plans the estimator priced.
        plans_exhaustive: plans an exhaustive search over the same Cells would price.
        plans_joint: plans of a joint search over the same allocations without the Cell
            abstraction (every stage count, every contiguous split of the model's partition
            units into stages, an independent data × tensor shape per stage), as an Alpa-style
            auto-parallel search faces.
    """

    cells_enumerated: int
    cells_pruned_memory: int
    cells_pruned_compute: int
    cells_infeasible: int
    cells_dominated: int
    plans_priced: int
    plans_exhaustive: int
    plans_joint: int


@dataclass(frozen=True)
class TunerResult:
    """Ranked candidate Cells of one (model, batch) on the tuner's cluster.

    Attributes:
        model: the model.
        global_batch: samples per iteration.
        candidates: non-dominated feasible Cells, best throughput first (empty: the job fits
            nowhere on this cluster).
        stats: search statistics.
    """

    model: ModelSpec
    global_batch: int
    candidates: tuple[CellEstimate, ...]
    stats: SearchStats

    @property
    def feasible(self) -> bool:
        """At least one Cell fits."""
        return bool(self.candidates)


def layouts_for(group: NodeGroup, num_gpus: int) -> list[Layout]:
    """Uniform layouts of ``num_gpus`` GPUs the node group allows, fewest nodes first."""
    out = []
    g = min(group.gpus_per_node, num_gpus)
    while g >= 1:
        if num_gpus % g == 0 and num_gpus // g <= group.num_nodes:
            out.append(Layout(num_gpus // g, g))
        g //= 2
    return out


class Tuner:
    """Finds and ranks Cells for jobs on one cluster.

    Args:
        cluster: the cluster.
        estimator: prices plans.
        config: tuner settings.
    """

    def __init__(
        self, cluster: ClusterSpec, estimator: Estimator, config: TunerConfig | None = None
    ) -> None:
        self.cluster = cluster
        self.estimator = estimator
        self.config = config or TunerConfig()
        self._cache: dict[tuple[ModelSpec, int], TunerResult] = {}
        self._layout_cache: dict[
            tuple[ModelSpec, int, str, Layout, PlanConstraints], PlanEstimate | None
        ] = {}
        self.cache_hits = 0
        self.cache_misses = 0

    # ------------------------------------------------------------------ bounds
    def _state_bytes_lower_bound(self, model: ModelSpec, num_gpus: int) -> float:
        costs = model_costs(model)
        fw = self.estimator.framework
        nbytes = costs.dtype_bytes
        grad = fw.gradient_bytes(model.dtype, nbytes)
        opt = optimizer_state_bytes(model.optimizer, nbytes)
        return costs.params * (nbytes + grad + opt) / num_gpus

    def _time_lower_bound(self, model: ModelSpec, batch: int, group: NodeGroup, n: int) -> float:
        costs = model_costs(model)
        cal = self.estimator.calibration
        peak = group.gpu.peak_flops(model.dtype) * cal.family(model.family)
        eta = cal.gpu(group.gpu_type).eta_max
        return costs.training_flops(batch, recompute=False) / (n * peak * eta)

    # ------------------------------------------------------------------ search
    def _stage_options(self, model: ModelSpec, n: int) -> list[int]:
        out = []
        p = 1
        while p <= n:
            if stage_costs(model, self.estimator.framework, p) is None:
                break
            out.append(p)
            p *= 2
        return out

    def tune(self, model: ModelSpec, global_batch: int) -> TunerResult:
        """Ranked candidate Cells of a job (cached per (model, batch))."""
        key = (model, global_batch)
        hit = self._cache.get(key)
        if hit is not None:
            self.cache_hits += 1
            return hit
        self.cache_misses += 1
        result = self._tune(model, global_batch)
        self._cache[key] = result
        return result

    def _tune(self, model: ModelSpec, batch: int) -> TunerResult:
        cfg = self.config
        est = self.estimator
        enumerated = pruned_mem = pruned_compute = infeasible = 0
        priced = exhaustive = joint = 0
        kept: list[CellEstimate] = []
        dominated = 0
        for group in self.cluster.groups:
            limit = group.gpu.memory_gb * 1e9 * est.framework.usable_memory_fraction
            best_smaller: float = 0.0  # best throughput among smaller Cells of this type
            per_n: list[CellEstimate] = []
            n = 1
            while n <= min(cfg.max_gpus, group.num_gpus):
                layouts = layouts_for(group, n)
                stages = self._stage_options(model, n)
                cells = [Cell(group.gpu_type, lay, p) for lay in layouts for p in stages]
                enumerated += len(cells)
                exhaustive += sum(self._plans_count(model, batch, group, c) for c in cells)
                joint += sum(self._joint_count(model, lay, group) for lay in layouts)
                if self._state_bytes_lower_bound(model, n) > limit:
                    pruned_mem += len(cells)
                    n *= 2
                    continue
                if best_smaller > 0:
                    ideal = batch / self._time_lower_bound(model, batch, group, n)
                    if ideal < best_smaller * (1 + cfg.dominance_threshold):
                        pruned_compute += len(cells)
                        n *= 2
                        continue
                best_this_n: list[CellEstimate] = []
                for lay in layouts:
                    best_layout: CellEstimate | None = None
                    for p in stages:
                        cell = Cell(group.gpu_type, lay, p)
                        best, count = est.best_plan(model, batch, group, cell)
                        priced += count
                        if best is None:
                            infeasible += 1
                            continue
                        ce = CellEstimate(cell, batch, best, count)
                        if best_layout is None or ce.iter_time_s < best_layout.iter_time_s:
                            if best_layout is not None:
                                dominated += 1
                            best_layout = ce
                        else:
                            dominated += 1
                    if best_layout is not None:
                        best_this_n.append(best_layout)
                for ce in best_this_n:
                    if best_smaller and ce.throughput < best_smaller * (
                        1 + cfg.dominance_threshold
                    ):
                        dominated += 1
                    else:
                        per_n.append(ce)
                if best_this_n:
                    best_smaller = max(best_smaller, *(ce.throughput for ce in best_this_n))
                n *= 2
            kept.extend(per_n)
        kept.sort(key=lambda ce: (-ce.throughput, ce.num_gpus, ce.cell))
        if cfg.max_candidates is not None:
            kept = kept[: cfg.max_candidates]
        stats = SearchStats(
            cells_enumerated=enumerated,
            cells_pruned_memory=pruned_mem,
            cells_pruned_compute=pruned_compute,
            cells_infeasible=infeasible,
            cells_dominated=dominated,
            plans_priced=priced,
            plans_exhaustive=exhaustive,
            plans_joint=joint,
        )
        return TunerResult(model=model, global_batch=batch, candidates=tuple(kept), stats=stats)

    def _plans_count(self, model: ModelSpec, batch: int, group: NodeGroup, cell: Cell) -> int:
        return self.estimator.count_plans(
            model, batch, cell.layout, cell.stages, group.gpus_per_node
        )

    def _joint_count(self, model: ModelSpec, layout: Layout, group: NodeGroup) -> int:
        fw = self.estimator.framework
        units = fw.layer_clusters.get(model.family) or sum(
            1 for x in model_costs(model).layers if x.kind in ("gemm", "conv")
        )
        n, g = layout.num_gpus, layout.gpus_per_node
        total = 0
        for p in range(1, min(n, units) + 1):
            if n % p:
                continue
            q = n // p
            shapes = sum(
                1
                for k in range(q.bit_length())
                if (1 << k) <= min(q, g, group.gpus_per_node) and q % (1 << k) == 0
            )
            micro = max(1, len(fw.microbatch_sizes)) * len(fw.recompute_options)
            total += math.comb(units - 1, p - 1) * shapes**p * micro
        return total

    # ------------------------------------------------------------------ arbitrary layouts
    def best_in_layout(
        self,
        model: ModelSpec,
        global_batch: int,
        gpu_type: str,
        layout: Layout,
        constraints: PlanConstraints | None = None,
    ) -> PlanEstimate | None:
        """Best plan of a job on a given layout of a GPU type, optionally constrained (cached).

        Used for allocations outside the ranked list, e.g. FCFS's requested GPUs with data
        parallelism only (``PlanConstraints(pipeline=1, tensor=1)``).
        """
        cons = constraints or PlanConstraints()
        key = (model, global_batch, gpu_type, layout, cons)
        if key in self._layout_cache:
            self.cache_hits += 1
            return self._layout_cache[key]
        self.cache_misses += 1
        group = self.cluster.group(gpu_type)
        best, _ = self.estimator.search(model, global_batch, group, layout, cons)
        self._layout_cache[key] = best
        return best
