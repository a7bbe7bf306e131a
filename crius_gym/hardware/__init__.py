"""Hardware: the GPU and link catalogue, clusters of node groups, and node-aware allocation."""

from crius_gym.hardware.cluster import ClusterSpec, NodeGroup
from crius_gym.hardware.gpus import GPUCatalog, GPUSpec, LinkSpec, load_gpu_catalog

__all__ = ["ClusterSpec", "GPUCatalog", "GPUSpec", "LinkSpec", "NodeGroup", "load_gpu_catalog"]
