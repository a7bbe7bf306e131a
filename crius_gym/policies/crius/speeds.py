"""Speeds: the Cells a job may use on a GPU type and count, with estimated throughput.

Also the memoised fit checks of one allocation (:class:`FitMemo`), which follow the
allocator's rule (:meth:`crius_gym.sim.allocator.Allocator.fits_after_release`).

Part of :mod:`crius_gym.policies.crius` (its docstring has the algorithm).
"""

from __future__ import annotations

from dataclasses import dataclass

from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import Layout
from crius_gym.perf.tuner import Tuner
from crius_gym.policies.data_parallel import DATA_PARALLEL  # crius-dp's restriction
from crius_gym.policies.placement import layouts
from crius_gym.sim.allocator import Allocator, Placement, released_node_gain
from crius_gym.sim.snapshot import Snapshot
from crius_gym.workload.job import Job

# Speeds: the Cells a job may use on a GPU type and count, with estimated throughput


@dataclass(frozen=True)
class Option:
    """A Cell a job can run on and its estimated speed (samples/s)."""

    cell: Cell
    throughput: float


class FitMemo:
    """Fit checks on an allocation that does not change while the memo is used.

    Both checks count the nodes of a type with at least ``g`` free GPUs, memoised per
    (GPU type, ``g``): a ``k × g`` layout fits iff at least ``k`` nodes have ``g`` free (as
    :meth:`Allocator.can_place`), and after releasing a placement the count is corrected on
    the placement's own nodes only (as :meth:`Allocator.fits_after_release`), so no allocator
    copy is needed.
    """

    def __init__(self, alloc: Allocator) -> None:
        self.alloc = alloc
        self._nodes_with: dict[tuple[str, int], int] = {}
        self._lists: dict[str, list[int]] = {}

    def can_place(self, cell: Cell) -> bool:
        """Whether the Cell fits in the free GPUs (as :meth:`Allocator.can_place`)."""
        lay = cell.layout
        return self._count(cell.gpu_type, lay.gpus_per_node) >= lay.num_nodes

    def _count(self, gpu_type: str, gpus_per_node: int) -> int:
        key = (gpu_type, gpus_per_node)
        hit = self._nodes_with.get(key)
        if hit is None:
            hit = self._nodes_with[key] = self.alloc.nodes_with(gpu_type, gpus_per_node)
        return hit

    def _free_list(self, gpu_type: str) -> list[int]:
        # Python ints per node, read once per type: a placement's few nodes are then indexed
        # without a numpy call per check.
        hit = self._lists.get(gpu_type)
        if hit is None:
            hit = self._lists[gpu_type] = self.alloc.free_list(gpu_type)
        return hit

    def first(self, options: tuple[Option, ...]) -> Option | None:
        """The first of ``options`` whose Cell fits in the free GPUs."""
        for opt in options:
            if self.can_place(opt.cell):
                return opt
        return None

    def first_released(self, placement: Placement, options: tuple[Option, ...]) -> Option | None:
        """The first of ``options`` (on ``placement``'s type) that fits once it is released."""
        for opt in options:
            if self.fits_released(placement, opt.cell.layout):
                return opt
        return None

    def fits_released(self, placement: Placement, layout: Layout) -> bool:
        """Whether ``layout`` fits on ``placement``'s type once ``placement`` is released."""
        g = layout.gpus_per_node
        free = self._free_list(placement.gpu_type)
        own = [free[node] for node in placement.nodes]
        gained = released_node_gain(own, placement.gpus_per_node, g)  # the allocator's rule
        return self._count(placement.gpu_type, g) + gained >= layout.num_nodes


class HistogramFit:
    """Fit checks on one GPU type from its histogram of nodes by free GPUs.

    The same rule as :meth:`Allocator.can_place` (a ``k × g`` Cell fits iff ``k`` nodes have
    ``g`` free), for an allocation known only as a histogram
    (:meth:`Allocator.histogram_after_move`).

    Args:
        gpu_type: the type the histogram describes; Cells of other types are not answered.
        hist: entry ``f``: nodes with exactly ``f`` free GPUs.
    """

    __slots__ = ("gpu_type", "hist")

    def __init__(self, gpu_type: str, hist: list[int]) -> None:
        self.gpu_type = gpu_type
        self.hist = hist

    def can_place(self, cell: Cell) -> bool:
        """Whether the Cell (of this type) fits."""
        if cell.gpu_type != self.gpu_type:
            raise ValueError(f"a {self.gpu_type} histogram cannot place {cell}")
        lay = cell.layout
        return sum(self.hist[lay.gpus_per_node :]) >= lay.num_nodes


def _pow2_floor(n: int) -> int:
    return 1 << (max(1, n).bit_length() - 1)


def _pow2_ceil(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()


def _pow2_range(top: int) -> list[int]:
    """1, 2, 4, … up to ``top``."""
    return [1 << k for k in range(top.bit_length()) if 1 << k <= top]


class SpeedTable:
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
        self._options: dict[tuple[str, int, str, int], tuple[Option, ...]] = {}
        self._best: dict[tuple[str, int, str, int], float] = {}
        self._elsewhere: dict[tuple[str, int, str, int], float] = {}
        self._quota: dict[tuple[str, int, str | None, int | None], tuple[str, int] | None] = {}

    def options(self, job: Job, gpu_type: str, num_gpus: int) -> tuple[Option, ...]:
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
                out = [Option(ce.cell, ce.throughput) for ce in mine]
        elif num_gpus <= self.max_gpus.get(gpu_type, 0):
            for lay in layouts(self.cluster, gpu_type, num_gpus):
                est = self.tuner.best_in_layout(
                    job.model, job.global_batch, gpu_type, lay, self.constraints
                )
                if est is not None:
                    stages = 1 if self.data_parallel_only else est.plan.pipeline
                    out.append(
                        Option(Cell(gpu_type, lay, stages), job.global_batch / est.iter_time_s)
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
        self, free: Allocator | FitMemo | HistogramFit, job: Job, gpu_type: str, num_gpus: int
    ) -> Option | None:
        """The first option (fewest nodes) that fits in the free GPUs."""
        options = self.options(job, gpu_type, num_gpus)
        if isinstance(free, FitMemo):
            return free.first(options)
        for opt in options:
            if free.can_place(opt.cell):
                return opt
        return None

    def first_fit_released(
        self, free: FitMemo, placement: Placement, job: Job, num_gpus: int
    ) -> Option | None:
        """The first option on ``placement``'s type that fits once ``placement`` is released."""
        return free.first_released(placement, self.options(job, placement.gpu_type, num_gpus))

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
