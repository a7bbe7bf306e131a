"""Node-aware GPU allocation with real fragmentation.

A Cell needs ``num_nodes`` nodes of its GPU type with ``gpus_per_node`` free GPUs each.  The
allocator picks nodes best-fit: the nodes with the fewest free GPUs that still fit, then the
lowest index — consolidating jobs and keeping whole nodes free for multi-node Cells, like the
"fill whole nodes" preference of the Crius placement.  State is one integer array of free GPUs
per node and type, so a policy can copy it cheaply to plan several actions.
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
        # One array for all nodes (groups in order) with a view per type: readers that want
        # every node (FitIndex) take it in one call, and a copy is one array copy.
        self._all = np.concatenate(
            [np.full(g.num_nodes, g.gpus_per_node, dtype=np.int64) for g in cluster.groups]
        )
        self._free = self._views(self._all)
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
        other._all = self._all.copy()
        other._free = other._views(other._all)
        other._free_total = dict(self._free_total)
        return other

    def __deepcopy__(self, memo: dict[int, object]) -> Allocator:
        # The per-type arrays are views into one array: a generic deep copy would copy them
        # apart, and the copy's placements would stop updating its totals.
        return self.copy()

    def __getstate__(self) -> dict[str, object]:
        state = dict(self.__dict__)
        del state["_free"]  # views: rebuilt from the one array on unpickling
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._free = self._views(self._all)

    def _views(self, all_nodes: np.ndarray) -> dict[str, np.ndarray]:
        views, start = {}, 0
        for g in self.cluster.groups:
            views[g.gpu_type] = all_nodes[start : start + g.num_nodes]
            start += g.num_nodes
        return views

    def free_gpus(self, gpu_type: str) -> int:
        """Free GPUs of a type."""
        return self._free_total[gpu_type]

    def total_gpus(self, gpu_type: str) -> int:
        """GPUs of a type."""
        return self._total[gpu_type]

    def free_per_node_all(self) -> np.ndarray:
        """Read-only view of free GPUs per node of every group, groups in cluster order."""
        view = self._all.view()
        view.flags.writeable = False
        return view

    def free_per_node(self, gpu_type: str) -> np.ndarray:
        """Read-only view of free GPUs per node of a type."""
        view = self._free[gpu_type].view()
        view.flags.writeable = False
        return view

    def _candidate_free(self, cell: Cell) -> np.ndarray | None:
        """Free GPUs per node of the Cell's type, or None when the totals alone rule it out."""
        free = self._free.get(cell.gpu_type)
        if free is None:
            return None
        lay = cell.layout
        if lay.gpus_per_node > self._capacity[cell.gpu_type]:
            return None
        if self._free_total[cell.gpu_type] < lay.num_gpus:
            return None
        return free

    def _choose(self, cell: Cell) -> list[int] | None:
        """Best-fit nodes for a Cell, ascending (None: it does not fit)."""
        free = self._candidate_free(cell)
        if free is None:
            return None
        lay = cell.layout
        cap = self._capacity[cell.gpu_type]
        if lay.num_nodes == 1:
            # Best fit on one node without a sort: the fewest free GPUs that still fit (argmin
            # takes the lowest index among ties), nodes that do not fit masked above capacity.
            masked = np.where(free >= lay.gpus_per_node, free, cap + 1)
            node = int(masked.argmin())
            return None if masked[node] > cap else [node]
        fits = np.flatnonzero(free >= lay.gpus_per_node)
        if len(fits) < lay.num_nodes:
            return None
        # Best fit: fewest free GPUs first, then lowest index (stable sort keeps index order).
        order = np.argsort(free[fits], kind="stable")
        return sorted(fits[order[: lay.num_nodes]].tolist())

    def can_place(self, cell: Cell) -> bool:
        """Whether the Cell fits in the free GPUs now."""
        free = self._candidate_free(cell)
        if free is None:
            return False
        lay = cell.layout
        return int(np.count_nonzero(free >= lay.gpus_per_node)) >= lay.num_nodes

    def fits_after_release(self, cell: Cell, placement: Placement) -> bool:
        """Whether the Cell would fit once ``placement``'s GPUs are free again.

        The rule every fit-after-release check follows (the env's ``FitIndex`` and the Crius
        heuristic count nodes their own fast ways, then add :func:`released_node_gain`): a
        ``k × g`` Cell fits iff at least ``k`` nodes of its type have ``g`` free GPUs, counting
        the placement's nodes with its GPUs given back. Nothing is changed.
        """
        if cell.gpu_type != placement.gpu_type:
            return self.can_place(cell)
        free = self._free.get(cell.gpu_type)
        lay = cell.layout
        if free is None or lay.gpus_per_node > self._capacity[cell.gpu_type]:
            return False
        already = int(np.count_nonzero(free >= lay.gpus_per_node))
        own = free[list(placement.nodes)].tolist()
        gained = released_node_gain(own, placement.gpus_per_node, lay.gpus_per_node)
        return already + gained >= lay.num_nodes

    def place(self, cell: Cell) -> Placement | None:
        """Take GPUs for a Cell (best fit); None when it does not fit."""
        nodes = self._choose(cell)
        if nodes is None:
            return None
        g = cell.layout.gpus_per_node
        free = self._free[cell.gpu_type]
        if len(nodes) == 1:
            free[nodes[0]] -= g
        else:
            free[np.asarray(nodes, dtype=np.int64)] -= g
        self._free_total[cell.gpu_type] -= len(nodes) * g
        return Placement(cell.gpu_type, tuple(nodes), g)

    def take(self, placement: Placement) -> None:
        """Take exactly the GPUs of ``placement`` (they must be free)."""
        free = self._free[placement.gpu_type]
        idx = np.asarray(placement.nodes, dtype=np.int64)
        if (free[idx] < placement.gpus_per_node).any():
            raise RuntimeError(f"GPUs of {placement} are not free")
        free[idx] -= placement.gpus_per_node
        self._free_total[placement.gpu_type] -= placement.num_gpus

    def release(self, placement: Placement) -> None:
        """Return a placement's GPUs."""
        free = self._free[placement.gpu_type]
        cap = self._capacity[placement.gpu_type]
        if len(placement.nodes) == 1:  # most Cells: scalar arithmetic, no index array
            node = placement.nodes[0]
            free[node] += placement.gpus_per_node
            over = free[node] > cap
        else:
            idx = np.asarray(placement.nodes, dtype=np.int64)
            free[idx] += placement.gpus_per_node
            over = (free[idx] > cap).any()
        if over:
            raise RuntimeError(f"released more GPUs than node capacity: {placement}")
        self._free_total[placement.gpu_type] += placement.num_gpus

    def busy_gpus(self) -> int:
        """GPUs allocated, all types."""
        return self._num_gpus - sum(self._free_total.values())
