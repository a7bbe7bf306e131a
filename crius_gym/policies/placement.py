"""Helpers shared by rule-based policies: requested allocations and fitting Cells."""

from __future__ import annotations

from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import Layout
from crius_gym.perf.tuner import layouts_for
from crius_gym.sim.allocator import Allocator
from crius_gym.sim.snapshot import Snapshot
from crius_gym.workload.job import Job


def requested_allocation(job: Job, snapshot: Snapshot) -> tuple[str, int] | None:
    """The (GPU type, GPU count) a job asked for; missing parts come from its best Cell.

    Returns None when the job's request names a GPU type the cluster does not have or asks for
    more GPUs than that type has.
    """
    cands = snapshot.candidates(job).candidates
    gpu_type = job.requested_gpu_type or (cands[0].cell.gpu_type if cands else None)
    if gpu_type is None or gpu_type not in snapshot.cluster.gpu_types:
        return None
    n = job.requested_gpus
    if n is None:
        same = [c for c in cands if c.cell.gpu_type == gpu_type]
        n = same[0].num_gpus if same else 1
    if n > snapshot.cluster.group(gpu_type).num_gpus:
        return None
    return gpu_type, n


def layouts(cluster: ClusterSpec, gpu_type: str, num_gpus: int) -> list[Layout]:
    """Uniform layouts of ``num_gpus`` on a type, fewest nodes first (Crius's preference)."""
    return layouts_for(cluster.group(gpu_type), num_gpus)


def first_fitting(alloc: Allocator, cells: list[Cell]) -> Cell | None:
    """The first Cell that fits in ``alloc`` now."""
    for cell in cells:
        if alloc.can_place(cell):
            return cell
    return None
