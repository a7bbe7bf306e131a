"""Clusters as lists of node groups (one GPU type each)."""

from __future__ import annotations

from dataclasses import dataclass

from crius_gym.errors import ConfigError
from crius_gym.hardware.gpus import GPUCatalog, GPUSpec, LinkSpec, load_gpu_catalog


@dataclass(frozen=True)
class NodeGroup:
    """``num_nodes`` identical nodes of one GPU type.

    Attributes:
        gpu: the GPU type.
        num_nodes: number of nodes.
        gpus_per_node: GPUs in each node.
        intra_link: GPU-to-GPU link inside a node.
        inter_link: network between nodes.
        nics_per_node: NICs per node on ``inter_link`` (node bandwidth = NICs × link bandwidth).
    """

    gpu: GPUSpec
    num_nodes: int
    gpus_per_node: int
    intra_link: LinkSpec
    inter_link: LinkSpec
    nics_per_node: int = 1

    def __post_init__(self) -> None:
        if self.num_nodes < 1 or self.gpus_per_node < 1 or self.nics_per_node < 1:
            raise ConfigError(
                f"node group {self.gpu.name}: num_nodes, gpus_per_node, nics_per_node must be >= 1"
            )
        if self.intra_link.scope != "intra":
            raise ConfigError(
                f"node group {self.gpu.name}: intra_link {self.intra_link.name} is not intra-node"
            )
        if self.inter_link.scope != "inter":
            raise ConfigError(
                f"node group {self.gpu.name}: inter_link {self.inter_link.name} is not a network"
            )

    @property
    def gpu_type(self) -> str:
        """Canonical name of the group's GPU type."""
        return self.gpu.name

    @property
    def num_gpus(self) -> int:
        """GPUs in the group."""
        return self.num_nodes * self.gpus_per_node

    @property
    def node_bandwidth_gbps(self) -> float:
        """Inter-node bandwidth of one node, GB/s per direction."""
        return self.inter_link.bandwidth_gbps * self.nics_per_node


@dataclass(frozen=True)
class ClusterSpec:
    """A heterogeneous cluster: node groups with distinct GPU types.

    One job never spans GPU types (as in Crius), so each GPU type appears in exactly one group.
    """

    groups: tuple[NodeGroup, ...]

    def __post_init__(self) -> None:
        if not self.groups:
            raise ConfigError("a cluster needs at least one node group")
        types = [g.gpu_type for g in self.groups]
        dup = {t for t in types if types.count(t) > 1}
        if dup:
            raise ConfigError(f"GPU type(s) {sorted(dup)} appear in more than one node group")

    @property
    def gpu_types(self) -> tuple[str, ...]:
        """GPU types in group order."""
        return tuple(g.gpu_type for g in self.groups)

    @property
    def num_gpus(self) -> int:
        """Total GPUs."""
        return sum(g.num_gpus for g in self.groups)

    @property
    def num_nodes(self) -> int:
        """Total nodes."""
        return sum(g.num_nodes for g in self.groups)

    def group(self, gpu_type: str) -> NodeGroup:
        """Return the group of a GPU type (canonical name)."""
        for g in self.groups:
            if g.gpu_type == gpu_type:
                return g
        raise KeyError(f"cluster has no {gpu_type} nodes; it has {', '.join(self.gpu_types)}")


NODE_GROUP_KEYS = frozenset(
    {"gpu", "nodes", "gpus_per_node", "intra_link", "inter_link", "nics_per_node"}
)


def build_cluster(
    groups: list[dict[str, object]], catalog: GPUCatalog | None = None
) -> ClusterSpec:
    """Build a cluster from plain mappings (as found in scenario files).

    Each mapping has ``gpu`` (catalogue name or alias), ``nodes``, and optionally
    ``gpus_per_node`` (default: the GPU's usual node size), ``intra_link`` (default: the GPU's),
    ``inter_link`` (default ``ib-hdr``) and ``nics_per_node`` (default 1).

    Raises:
        UnknownNameError: unknown GPU type or link.
        ConfigError: a missing or invalid value.
    """
    cat = catalog or load_gpu_catalog()
    out = []
    for i, g in enumerate(groups):
        if not isinstance(g, dict):
            raise ConfigError(f"node group #{i + 1} must be a mapping, got {g!r}")
        # A misspelt key would otherwise fall back to a default silently (e.g. 'gpus_per_nod'
        # giving the GPU's usual node size).
        unknown = sorted(set(g) - NODE_GROUP_KEYS)
        if unknown:
            raise ConfigError(
                f"node group #{i + 1}: unknown key(s) {unknown}; allowed: {sorted(NODE_GROUP_KEYS)}"
            )
        if "gpu" not in g or "nodes" not in g:
            raise ConfigError(f"node group #{i + 1} needs 'gpu' and 'nodes'")
        gpu = cat.gpu(str(g["gpu"]))
        try:
            out.append(
                NodeGroup(
                    gpu=gpu,
                    num_nodes=int(str(g["nodes"])),
                    gpus_per_node=int(str(g.get("gpus_per_node", gpu.gpus_per_node))),
                    intra_link=cat.link(str(g["intra_link"]))
                    if "intra_link" in g
                    else gpu.intra_link,
                    inter_link=cat.link(str(g.get("inter_link", "ib-hdr"))),
                    nics_per_node=int(str(g.get("nics_per_node", 1))),
                )
            )
        except ValueError as exc:
            raise ConfigError(f"node group #{i + 1} ({gpu.name}): {exc}") from exc
    return ClusterSpec(tuple(out))
