"""Jobs and traces."""

from __future__ import annotations

from dataclasses import dataclass, replace

from crius_gym.errors import ConfigError
from crius_gym.workload.models import ModelSpec


@dataclass(frozen=True)
class Job:
    """A training job as submitted.

    Attributes:
        job_id: unique identifier within its trace.
        arrival_s: submission time, seconds from the trace's start.
        model: the model it trains.
        global_batch: samples per iteration.
        iterations: iterations to run.
        requested_gpus: GPUs the user asked for (None: no request).
        requested_gpu_type: canonical GPU type the user asked for (None: no request).
        deadline_s: deadline, seconds from the trace's start (None: none).
    """

    job_id: str
    arrival_s: float
    model: ModelSpec
    global_batch: int
    iterations: int
    requested_gpus: int | None = None
    requested_gpu_type: str | None = None
    deadline_s: float | None = None

    def __post_init__(self) -> None:
        if self.arrival_s < 0:
            raise ConfigError(f"job {self.job_id}: arrival_s must be >= 0")
        if self.global_batch < 1 or self.iterations < 1:
            raise ConfigError(f"job {self.job_id}: global_batch and iterations must be >= 1")
        if self.requested_gpus is not None and self.requested_gpus < 1:
            raise ConfigError(f"job {self.job_id}: requested_gpus must be >= 1")


@dataclass(frozen=True)
class TraceIssue:
    """A trace row that could not be used.

    Attributes:
        line: 1-based line in the file (header = 1).
        reason: why it was skipped, naming the field.
    """

    line: int
    reason: str


@dataclass(frozen=True)
class Trace:
    """Jobs in arrival order (ties keep input order).

    Attributes:
        name: label (file stem, or generator and seed).
        jobs: the jobs, sorted by arrival.
        skipped: rows of the source that could not be used.
        iteration_divisor: the source's iteration counts were floor-divided by this when read
            (1: as they stand; 5: an Arena simulation trace read as the artifact reads it).
    """

    name: str
    jobs: tuple[Job, ...]
    skipped: tuple[TraceIssue, ...] = ()
    iteration_divisor: int = 1

    def __post_init__(self) -> None:
        ids = [j.job_id for j in self.jobs]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"trace {self.name}: duplicate job ids")
        arrivals = [j.arrival_s for j in self.jobs]
        if arrivals != sorted(arrivals):
            raise ConfigError(f"trace {self.name}: jobs must be sorted by arrival")

    def __len__(self) -> int:
        return len(self.jobs)

    def skipped_report(self, limit: int = 20) -> list[str]:
        """One line per skipped source row (``line N: reason``).

        At most ``limit`` lines, then how many more; empty when nothing was skipped.
        """
        lines = [f"line {i.line}: {i.reason}" for i in self.skipped[:limit]]
        if len(self.skipped) > limit:
            lines.append(f"... and {len(self.skipped) - limit} more")
        return lines

    def window(self, start: int, count: int, name: str | None = None) -> Trace:
        """``count`` consecutive jobs from index ``start``, arrivals shifted to start at 0."""
        jobs = self.jobs[start : start + count]
        if not jobs:
            raise ConfigError(f"trace {self.name}: empty window [{start}, {start + count})")
        t0 = jobs[0].arrival_s
        shifted = tuple(
            replace(
                j,
                arrival_s=j.arrival_s - t0,
                deadline_s=None if j.deadline_s is None else j.deadline_s - t0,
            )
            for j in jobs
        )
        return Trace(
            name or f"{self.name}[{start}:{start + count}]",
            shifted,
            iteration_divisor=self.iteration_divisor,
        )

    def scaled(self, iterations_factor: float, name: str | None = None) -> Trace:
        """The same trace with every job's iterations multiplied (at least 1)."""
        jobs = tuple(
            replace(j, iterations=max(1, round(j.iterations * iterations_factor)))
            for j in self.jobs
        )
        return Trace(
            name or f"{self.name}x{iterations_factor:g}",
            jobs,
            self.skipped,
            self.iteration_divisor,
        )
