"""Node-aware GPU allocation with real fragmentation.

A Cell needs ``num_nodes`` nodes of its GPU type with ``gpus_per_node`` free GPUs each.  The
allocator picks nodes best-fit: the nodes with the fewest free GPUs that still fit, then the
lowest index — consolidating jobs and keeping whole nodes free for multi-node Cells, like the
"fill whole nodes" preference of the Crius placement.  State is one list of free GPUs per node
(every type), so a policy can copy it cheaply to plan several actions, and per type a histogram
of nodes by free GPUs, so a fit check costs at most a node's GPUs in additions whatever the
cluster's size.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.cell import Cell


@dataclass(frozen=True)
class Placement:
    """Where a job runs.

    Attributes:
        gpu_type: the node group's GPU type.
        nodes: node indices inside the group.
        gpus_per_node: GPUs taken on each of them.
    """

    gpu_type: str
    nodes: tuple[int, ...]
    gpus_per_node: int

    @property
    def num_gpus(self) -> int:
        """GPUs held."""
        return len(self.nodes) * self.gpus_per_node


def released_node_gain(own_free: Iterable[int], released_per_node: int, gpus_per_node: int) -> int:
    """Nodes that reach ``gpus_per_node`` free GPUs only when a placement is released.

    Args:
        own_free: free GPUs now on each of the placement's nodes.
        released_per_node: GPUs the placement gives back on each of them.
        gpus_per_node: the free GPUs a Cell needs per node.

    Returns:
        How many of those nodes had fewer than ``gpus_per_node`` free GPUs and have at least
        that many after the release (the others were already counted, or stay short).
    """
    return sum(1 for f in own_free if f < gpus_per_node <= f + released_per_node)


class Allocator:
    """Free GPUs per node of every node group.

    Args:
        cluster: the cluster.
    """

    def __init__(self, cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self._capacity = {g.gpu_type: g.gpus_per_node for g in cluster.groups}
        # One Python list for all nodes (groups in order), each type a span of it: a copy is one
        # list copy, and the planners' many single-node reads and writes stay plain list
        # indexing (numpy scalar access costs several times more at these sizes).
        self._all: list[int] = [g.gpus_per_node for g in cluster.groups for _ in range(g.num_nodes)]
        self._span: dict[str, tuple[int, int]] = {}  # type -> (first node, end) in _all
        start = 0
        for g in cluster.groups:
            self._span[g.gpu_type] = (start, start + g.num_nodes)
            start += g.num_nodes
        # _hist[t][f]: nodes of type t with exactly f free GPUs (kept by every change).
        self._hist = {g.gpu_type: [0] * g.gpus_per_node + [g.num_nodes] for g in cluster.groups}
        self._total = {g.gpu_type: g.num_gpus for g in cluster.groups}
        self._num_gpus = cluster.num_gpus
        self._free_total = dict(self._total)

    def copy(self) -> Allocator:
        """An independent copy (for planning several actions)."""
        other = Allocator.__new__(Allocator)
        other.cluster = self.cluster
        other._capacity = self._capacity
        other._total = self._total
        other._num_gpus = self._num_gpus
        other._span = self._span
        other._all = self._all.copy()
        other._hist = {t: h.copy() for t, h in self._hist.items()}
        other._free_total = dict(self._free_total)
        return other

    def __deepcopy__(self, memo: dict[int, object]) -> Allocator:
        # A generic deep copy would also copy the cluster and the shared tables.
        return self.copy()

    def free_gpus(self, gpu_type: str) -> int:
        """Free GPUs of a type."""
        return self._free_total[gpu_type]

    def nodes_with(self, gpu_type: str, gpus_per_node: int) -> int:
        """Nodes of a type with at least ``gpus_per_node`` free GPUs (0 for an unknown type)."""
        hist = self._hist.get(gpu_type)
        return 0 if hist is None else sum(hist[gpus_per_node:])

    def total_gpus(self, gpu_type: str) -> int:
        """GPUs of a type."""
        return self._total[gpu_type]

    def free_per_node_all(self) -> np.ndarray:
        """Free GPUs per node of every group, groups in cluster order (a read-only copy)."""
        return _frozen(self._all)

    def free_per_node(self, gpu_type: str) -> np.ndarray:
        """Free GPUs per node of a type (a read-only copy)."""
        start, end = self._span[gpu_type]
        return _frozen(self._all[start:end])

    def free_list(self, gpu_type: str) -> list[int]:
        """Free GPUs per node of a type as a new Python list (for many single reads)."""
        start, end = self._span[gpu_type]
        return self._all[start:end]

    def free_list_all(self) -> list[int]:
        """Free GPUs per node of every group, groups in cluster order, as a new Python list."""
        return self._all.copy()

    def histogram(self, gpu_type: str) -> list[int]:
        """Entry ``f``: nodes of a type with exactly ``f`` free GPUs (a new list)."""
        return self._hist[gpu_type].copy()

    def _choose(self, cell: Cell) -> list[int] | None:
        """Best-fit nodes for a Cell, ascending (None: it does not fit)."""
        if not self.can_place(cell):
            return None
        lay = cell.layout
        start, end = self._span[cell.gpu_type]
        free, hist = self._all, self._hist[cell.gpu_type]
        # Best fit: the fewest free GPUs that still fit, then the lowest index.  The histogram
        # says how many nodes have each count, so only the chosen nodes are searched for.
        need = lay.num_nodes
        chosen: list[int] = []
        for f in range(lay.gpus_per_node, len(hist)):
            pos = start
            for _ in range(min(hist[f], need)):
                pos = free.index(f, pos, end)
                chosen.append(pos - start)
                pos += 1
            need = lay.num_nodes - len(chosen)
            if not need:
                break
        return chosen if lay.num_nodes == 1 else sorted(chosen)

    def can_place(self, cell: Cell) -> bool:
        """Whether the Cell fits in the free GPUs now.

        From the histogram alone: a ``k × g`` Cell fits iff ``k`` nodes have ``g`` free (none
        do when ``g`` exceeds the type's node size, or for a type the cluster does not have).
        """
        lay = cell.layout
        return self.nodes_with(cell.gpu_type, lay.gpus_per_node) >= lay.num_nodes

    def fits_after_release(self, cell: Cell, placement: Placement) -> bool:
        """Whether the Cell would fit once ``placement``'s GPUs are free again.

        The rule every fit-after-release check follows (the env's ``FitIndex`` and the Crius
        heuristic count nodes their own fast ways, then add :func:`released_node_gain`): a
        ``k × g`` Cell fits iff at least ``k`` nodes of its type have ``g`` free GPUs, counting
        the placement's nodes with its GPUs given back. Nothing is changed.
        """
        if cell.gpu_type != placement.gpu_type:
            return self.can_place(cell)
        lay = cell.layout
        if cell.gpu_type not in self._span:
            return False
        already = self.nodes_with(cell.gpu_type, lay.gpus_per_node)
        start = self._span[cell.gpu_type][0]
        own = [self._all[start + n] for n in placement.nodes]
        gained = released_node_gain(own, placement.gpus_per_node, lay.gpus_per_node)
        return already + gained >= lay.num_nodes

    def histogram_after_move(self, gpu_type: str, release: Placement, cell: Cell) -> list[int]:
        """Nodes of a type by free GPUs once ``release`` is freed and ``cell`` is then placed.

        Entry ``f`` counts the nodes with exactly ``f`` free GPUs, as :meth:`release` then
        :meth:`place` would leave them, without changing anything: best fit takes the nodes
        with the fewest free GPUs that still fit, so which counts it takes follows from the
        histogram alone.  Raises ``RuntimeError`` where those calls would fail.
        """
        hist = list(self._hist[gpu_type])
        if release.gpu_type == gpu_type:
            start, cap, g = self._span[gpu_type][0], self._capacity[gpu_type], release.gpus_per_node
            for n in release.nodes:
                f = self._all[start + n]
                if f + g > cap:
                    raise RuntimeError(f"released more GPUs than node capacity: {release}")
                hist[f] -= 1
                hist[f + g] += 1
        if cell.gpu_type == gpu_type:
            g, need = cell.layout.gpus_per_node, cell.layout.num_nodes
            for f in range(g, len(hist)):
                taken = min(hist[f], need)
                hist[f] -= taken
                hist[f - g] += taken  # below f: never taken again
                need -= taken
                if not need:
                    break
            if need:
                raise RuntimeError(f"{cell} does not fit after releasing {release}")
        return hist

    def place(self, cell: Cell) -> Placement | None:
        """Take GPUs for a Cell (best fit); None when it does not fit."""
        nodes = self._choose(cell)
        if nodes is None:
            return None
        g = cell.layout.gpus_per_node
        self._change(cell.gpu_type, nodes, -g)
        return Placement(cell.gpu_type, tuple(nodes), g)

    def take(self, placement: Placement) -> None:
        """Take exactly the GPUs of ``placement`` (they must be free)."""
        free, start = self._all, self._span[placement.gpu_type][0]
        if any(free[start + n] < placement.gpus_per_node for n in placement.nodes):
            raise RuntimeError(f"GPUs of {placement} are not free")
        self._change(placement.gpu_type, placement.nodes, -placement.gpus_per_node)

    def release(self, placement: Placement) -> None:
        """Return a placement's GPUs."""
        free, start = self._all, self._span[placement.gpu_type][0]
        cap = self._capacity[placement.gpu_type]
        if any(free[start + n] + placement.gpus_per_node > cap for n in placement.nodes):
            raise RuntimeError(f"released more GPUs than node capacity: {placement}")
        self._change(placement.gpu_type, placement.nodes, placement.gpus_per_node)

    def _change(self, gpu_type: str, nodes: Iterable[int], delta: int) -> None:
        """Add ``delta`` free GPUs on each of ``nodes`` (checked by the caller)."""
        start = self._span[gpu_type][0]
        free, hist = self._all, self._hist[gpu_type]
        count = 0
        for n in nodes:
            f = free[start + n]
            free[start + n] = f + delta
            hist[f] -= 1
            hist[f + delta] += 1
            count += 1
        self._free_total[gpu_type] += count * delta

    def busy_gpus(self) -> int:
        """GPUs allocated, all types."""
        return self._num_gpus - sum(self._free_total.values())


def _frozen(free: list[int]) -> np.ndarray:
    out = np.array(free, dtype=np.int64)
    out.flags.writeable = False
    return out
