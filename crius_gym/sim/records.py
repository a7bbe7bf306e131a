"""Per-job runtime state kept by the simulator, and the read-only view policies get."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import PlanConstraints
from crius_gym.sim.allocator import Placement
from crius_gym.workload.job import Job


class JobStatus(str, Enum):
    """Life cycle of a job in the simulator."""

    FUTURE = "future"  # not yet arrived
    WAITING = "waiting"  # queued for GPUs (new, or preempted)
    PAUSED = "paused"  # holds GPUs, tuning / restoring before it iterates
    RUNNING = "running"  # iterating
    FINISHED = "finished"
    REJECTED = "rejected"


#: The reject reason of a job no Cell can ever hold (rejected on arrival, under every policy).
UNRUNNABLE_REASON = "fits nowhere: no memory-feasible Cell on any GPU type"


class JobView(Protocol):
    """What a policy may read about a job (the simulator's record, typed read-only)."""

    @property
    def index(self) -> int:
        """Position of the job in the trace."""

    @property
    def job(self) -> Job:
        """The job as submitted."""

    @property
    def status(self) -> JobStatus:
        """Current status."""

    @property
    def progress_iters(self) -> float:
        """Iterations done as of ``last_update_s`` (see :meth:`progress_at` for any time)."""

    @property
    def last_update_s(self) -> float:
        """When ``progress_iters`` was last brought up to date."""

    def progress_at(self, now_s: float) -> float:
        """Iterations done at ``now_s`` (exact: adds the iterations run since the last update)."""

    @property
    def cell(self) -> Cell | None:
        """Current Cell (None while waiting)."""

    @property
    def iter_time_s(self) -> float:
        """Ground-truth seconds per iteration on the current Cell (0 while waiting)."""

    @property
    def estimated_iter_time_s(self) -> float:
        """The estimator's seconds per iteration on the current Cell (0 while waiting)."""

    @property
    def placement(self) -> Placement | None:
        """Nodes held (None while waiting)."""

    @property
    def waiting_since_s(self) -> float:
        """When the job last entered the queue."""

    @property
    def first_start_s(self) -> float | None:
        """When the job first got GPUs."""

    @property
    def preemptions(self) -> int:
        """Times it was preempted."""

    @property
    def reconfigurations(self) -> int:
        """Times it changed Cell while running."""


@dataclass
class JobRecord:
    """Mutable state of one job (owned by the simulator; policies see it as :class:`JobView`)."""

    index: int
    job: Job
    status: JobStatus = JobStatus.FUTURE
    progress_iters: float = 0.0
    cell: Cell | None = None
    last_cell: Cell | None = None  # the Cell it last ran on (kept after preemption, for results)
    constraints: PlanConstraints | None = None
    iter_time_s: float = 0.0
    estimated_iter_time_s: float = 0.0
    placement: Placement | None = None
    last_update_s: float = 0.0  # progress is exact as of this time
    resume_at_s: float = 0.0  # end of the current pause
    waiting_since_s: float = 0.0
    first_start_s: float | None = None
    finish_s: float | None = None
    queueing_s: float = 0.0
    paused_s: float = 0.0
    running_s: float = 0.0
    preemptions: int = 0
    reconfigurations: int = 0
    starts: int = 0
    version: int = 0  # bumped on every change that invalidates scheduled events
    reject_reason: str = ""
    # Artifact-compatible progress (SimConfig.artifact_compat.progress == "revalue"):
    # progress = base_iters + exec_s / iter_time_s, re-valued whenever the Cell changes.
    exec_s: float = 0.0  # seconds iterated since the last re-base (preemption)
    base_iters: float = 0.0  # iterations credited before the last re-base

    @property
    def remaining_iters(self) -> float:
        """Iterations left (as of the last state change)."""
        return max(0.0, self.job.iterations - self.progress_iters)

    def progress_at(self, now_s: float) -> float:
        """Iterations done at ``now_s`` (exact: adds the iterations run since the last update)."""
        if self.status is JobStatus.RUNNING and self.iter_time_s > 0:
            done = self.progress_iters + (now_s - self.last_update_s) / self.iter_time_s
            return min(float(self.job.iterations), done)
        return self.progress_iters

    @property
    def throughput(self) -> float:
        """Samples per second now (0 unless running)."""
        if self.status is not JobStatus.RUNNING or self.iter_time_s <= 0:
            return 0.0
        return self.job.global_batch / self.iter_time_s

    @property
    def num_gpus(self) -> int:
        """GPUs held (0 while waiting)."""
        return self.placement.num_gpus if self.placement else 0
