"""Ground truth: how fast a job really runs on a Cell.

The scheduler sees the tuner's estimates; the simulator advances jobs at the ground-truth rate.
By default the two are the same estimator.  :class:`MeasuredTruth` uses the Arena measured table
where it has the (model, batch, GPU type, layout) and the estimator elsewhere, so that the
scheduler's view and reality differ as on a real cluster.  :class:`ArtifactTableTruth` is the
Arena artifact's oracle setting: reality and the scheduler's view are both the artifact's table
with its fallbacks (:mod:`crius_gym.perf.artifact_table`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from functools import cache
from typing import Protocol

from crius_gym.errors import ConfigError
from crius_gym.perf.artifact_table import TableTuner
from crius_gym.perf.cell import Cell
from crius_gym.perf.measurements import Measurement
from crius_gym.perf.plan import Layout, PlanConstraints, PlanEstimate
from crius_gym.perf.tuner import Tuner
from crius_gym.workload.job import Job


@cache
def _stages_only(stages: int) -> PlanConstraints:
    # Memo of an immutable value: building the dataclass per job start was a visible cost.
    return PlanConstraints(pipeline=stages)


def cell_constraints(cell: Cell, constraints: PlanConstraints | None) -> PlanConstraints:
    """Plan restrictions of a Cell: its stage count plus any extra restriction."""
    if constraints is None:
        return _stages_only(cell.stages)
    return replace(constraints, pipeline=cell.stages)


def estimated_plan(
    tuner: Tuner, job: Job, cell: Cell, constraints: PlanConstraints | None
) -> PlanEstimate | None:
    """The estimator's best plan of a job in a Cell under extra restrictions (cached)."""
    return tuner.best_in_layout(
        job.model, job.global_batch, cell.gpu_type, cell.layout, cell_constraints(cell, constraints)
    )


class GroundTruth(Protocol):
    """Seconds per iteration of a job on a Cell, or None when it cannot run there."""

    name: str

    def iter_time_s(
        self, job: Job, cell: Cell, constraints: PlanConstraints | None
    ) -> float | None:
        """Real seconds per iteration."""


class EstimatorTruth:
    """Reality is the estimator (the default)."""

    name = "estimator"

    def __init__(self, tuner: Tuner) -> None:
        self.tuner = tuner

    def iter_time_s(
        self, job: Job, cell: Cell, constraints: PlanConstraints | None
    ) -> float | None:
        """The estimator's best plan in the Cell under the constraints."""
        est = estimated_plan(self.tuner, job, cell, constraints)
        return None if est is None else est.iter_time_s


class MeasuredTruth:
    """Measured iteration times where available (the Alpa-searched best plan of a layout).

    A measured time stands for the best plan of its layout, so it is used for unconstrained
    Cells of that layout whatever their stage count; constrained plans (e.g. data parallelism
    only) and unmeasured layouts fall back to the estimator.  Feasibility stays the estimator's
    (rows measured OOM also fall back to it): a policy decides on the estimator's view and
    cannot foresee a measured failure, so reality only changes speeds, never what may start.
    """

    name = "measured"

    def __init__(self, tuner: Tuner, measurements: Iterable[Measurement]) -> None:
        self.tuner = tuner
        self.fallback = EstimatorTruth(tuner)
        self._table: dict[tuple[str, int, str, Layout], float] = {}
        for m in measurements:
            if m.framework != "alpa":
                continue
            if m.status == "ok" and m.measured_s is not None:
                self._table[(m.model_name, m.global_batch, m.gpu_type, m.layout)] = m.measured_s
        self.hits = 0
        self.misses = 0

    def iter_time_s(
        self, job: Job, cell: Cell, constraints: PlanConstraints | None
    ) -> float | None:
        """Measured time when the table has it, else the estimator."""
        key = (job.model.name, job.global_batch, cell.gpu_type, cell.layout)
        estimated = self.fallback.iter_time_s(job, cell, constraints)
        if (
            estimated is not None
            and (constraints is None or constraints == PlanConstraints())
            and key in self._table
        ):
            self.hits += 1
            return self._table[key]
        self.misses += 1
        return estimated


class ArtifactTableTruth(EstimatorTruth):
    """Reality is the artifact's table, exactly what the scheduler sees (an oracle).

    Args:
        tuner: a :class:`~crius_gym.perf.artifact_table.TableTuner` (its prices are the table).

    Raises:
        ConfigError: the tuner is not table-backed.
    """

    name = "artifact-table"

    def __init__(self, tuner: Tuner) -> None:
        if not isinstance(tuner, TableTuner):
            raise ConfigError("ground truth 'artifact-table' needs the scenario's table tuner")
        super().__init__(tuner)
