"""The Cell: one job bound to a GPU type, a GPU count in a node layout, and a stage count."""

from __future__ import annotations

from dataclasses import dataclass

from crius_gym.perf.plan import Layout, PlanEstimate


@dataclass(frozen=True, order=True)
class Cell:
    """A scheduling unit.

    Attributes:
        gpu_type: canonical GPU name.
        layout: nodes × GPUs per node.
        stages: pipeline stages.
    """

    gpu_type: str
    layout: Layout
    stages: int

    @property
    def num_gpus(self) -> int:
        """GPUs the Cell occupies."""
        return self.layout.num_gpus

    def __str__(self) -> str:
        return f"{self.gpu_type}:{self.layout}:p{self.stages}"


@dataclass(frozen=True)
class CellEstimate:
    """A Cell with its best plan for one (model, global batch).

    Attributes:
        cell: the Cell.
        global_batch: samples per iteration.
        best: the fastest memory-feasible plan.
        plans_evaluated: plans priced to find it.
    """

    cell: Cell
    global_batch: int
    best: PlanEstimate
    plans_evaluated: int

    @property
    def iter_time_s(self) -> float:
        """Estimated iteration time of the best plan, seconds."""
        return self.best.iter_time_s

    @property
    def throughput(self) -> float:
        """Estimated samples per second."""
        return self.global_batch / self.best.iter_time_s

    @property
    def num_gpus(self) -> int:
        """GPUs the Cell occupies."""
        return self.cell.num_gpus
