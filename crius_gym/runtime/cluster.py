"""The Ray side of the runtime: a local multi-node cluster for a scenario, and its node agents.

Scenario nodes are spread over Ray nodes in blocks (``ray_nodes`` of them; several scenario
nodes share one Ray node, so the 32-node testbed runs on one machine). A local cluster
(:func:`start_local_cluster`, ``ray.cluster_utils.Cluster``) declares on each Ray node the
custom resources of the scenario nodes it hosts: ``crius_gpu_<type>`` (its GPUs of that type)
and ``crius_node_<type>_<index>`` (one scenario node's GPUs), so ``ray status`` shows the
scenario. One :class:`~crius_gym.runtime.agent.NodeAgent` per Ray node is pinned there by node
affinity, on a local cluster or on an existing one (``address``), and restarts if its process
dies (``max_restarts=-1``) while the node lives.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from crius_gym.errors import ConfigError
from crius_gym.hardware.cluster import ClusterSpec

#: A scenario node: (GPU type, index among the nodes of that type).
NodeKey = tuple[str, int]


def scenario_nodes(cluster: ClusterSpec) -> list[tuple[str, int, int]]:
    """Every scenario node as ``(gpu type, index, GPUs)``, in the cluster's group order."""
    out: list[tuple[str, int, int]] = []
    for group in cluster.groups:
        out += [(group.gpu_type, k, group.gpus_per_node) for k in range(group.num_nodes)]
    return out


def assign_nodes(cluster: ClusterSpec, ray_nodes: int) -> list[list[tuple[str, int, int]]]:
    """Scenario nodes in ``ray_nodes`` contiguous blocks of near-equal size.

    Raises:
        ConfigError: ``ray_nodes`` is below 1 or above the number of scenario nodes.
    """
    nodes = scenario_nodes(cluster)
    if not 1 <= ray_nodes <= len(nodes):
        raise ConfigError(
            f"ray_nodes must be in [1, {len(nodes)}] for this cluster, not {ray_nodes}"
        )
    size, extra = divmod(len(nodes), ray_nodes)
    blocks, at = [], 0
    for r in range(ray_nodes):
        n = size + (r < extra)
        blocks.append(nodes[at : at + n])
        at += n
    return blocks


def node_resources(block: Sequence[tuple[str, int, int]]) -> dict[str, float]:
    """The custom resources a Ray node hosting ``block`` declares."""
    res: dict[str, float] = {}
    for gpu_type, k, gpus in block:
        res[f"crius_gpu_{gpu_type}"] = res.get(f"crius_gpu_{gpu_type}", 0.0) + gpus
        res[f"crius_node_{gpu_type}_{k}"] = float(gpus)
    return res


def start_local_cluster(blocks: Sequence[Sequence[tuple[str, int, int]]]) -> tuple[Any, list[Any]]:
    """A local Ray cluster: a head with no CPUs and one worker node per block.

    Returns:
        The ``ray.cluster_utils.Cluster`` (``shutdown()`` it when done) and its worker nodes in
        block order (``cluster.worker_nodes`` is an unordered set).
    """
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 0, "include_dashboard": False},
    )
    nodes = [cluster.add_node(num_cpus=1, resources=node_resources(b)) for b in blocks]
    cluster.wait_for_nodes()
    return cluster, nodes


@dataclass
class AgentSlot:
    """One agent and what the driver knows of it.

    Attributes:
        block: the scenario nodes it hosts.
        ray_node_id: the Ray node it is pinned to.
        handle: its actor handle.
        sentinel: the pending call that fails when it dies.
        alive: False once its Ray node is gone.
    """

    block: list[tuple[str, int, int]]
    ray_node_id: str
    handle: Any
    sentinel: Any
    alive: bool = True


def ray_node_ids(local_nodes: Sequence[Any] | None) -> list[str]:
    """Alive Ray node ids that can host agents.

    A local cluster's worker nodes in order; on an existing cluster every alive node (workers
    first, then the head, each sorted by id for a stable map).
    """
    import ray

    if local_nodes is not None:
        return [n.node_id for n in local_nodes]
    nodes = [n for n in ray.nodes() if n.get("Alive")]  # type: ignore[no-untyped-call]
    workers = sorted(
        n["NodeID"] for n in nodes if not n.get("Resources", {}).get("node:__internal_head__")
    )
    heads = sorted(
        n["NodeID"] for n in nodes if n.get("Resources", {}).get("node:__internal_head__")
    )
    return workers + heads


def start_agents(
    blocks: Sequence[list[tuple[str, int, int]]], node_ids: Sequence[str]
) -> list[AgentSlot]:
    """One restartable agent per block, pinned to its Ray node; waits until each answers.

    Blocks beyond the number of Ray nodes share them round-robin.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from crius_gym.runtime.agent import NodeAgent

    if not node_ids:
        raise ConfigError("the Ray cluster has no alive node to run agents on")
    remote = ray.remote(num_cpus=0, max_restarts=-1, max_task_retries=0)(NodeAgent)
    slots = []
    for r, block in enumerate(blocks):
        node_id = node_ids[r % len(node_ids)]
        handle = remote.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
            max_concurrency=1000,
        ).remote(list(block))
        slots.append(AgentSlot(list(block), node_id, handle, None))
    ray.get([s.handle.ping.remote() for s in slots])
    for s in slots:
        s.sentinel = s.handle.sentinel.remote()
    return slots


def node_alive(node_id: str) -> bool:
    """Whether a Ray node is alive."""
    import ray

    return any(n["NodeID"] == node_id and n.get("Alive") for n in ray.nodes())  # type: ignore[no-untyped-call]
