"""The read-only view of the simulation a policy decides on."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, overload

import numpy as np

from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import PlanConstraints
from crius_gym.perf.tuner import Tuner, TunerResult
from crius_gym.sim.actions import TuningMode
from crius_gym.sim.allocator import Allocator
from crius_gym.sim.records import JobRecord, JobView
from crius_gym.sim.truth import estimated_plan
from crius_gym.workload.job import Job

if TYPE_CHECKING:
    from crius_gym.sim.simulator import Simulator


class JobQueue(Sequence[JobView]):
    """A read-only view of waiting jobs in arrival order, built in O(1).

    A decision that looks only at the head of a long queue (strict FCFS, or any policy that
    stops early) then costs the same whatever the queue length: building a tuple of every
    waiting job at each decision made an overloaded 50,000-job run quadratic.

    Args:
        records: every job record, by trace index.
        indices: trace indices of the waiting jobs in arrival order (not copied: the view is
            valid until the simulator next changes state, like its snapshot).
    """

    __slots__ = ("_indices", "_records")

    def __init__(self, records: Sequence[JobRecord], indices: Sequence[int]) -> None:
        self._records = records
        self._indices = indices

    def __len__(self) -> int:
        return len(self._indices)

    @overload
    def __getitem__(self, i: int) -> JobView: ...

    @overload
    def __getitem__(self, i: slice) -> tuple[JobView, ...]: ...

    def __getitem__(self, i: int | slice) -> JobView | tuple[JobView, ...]:
        if isinstance(i, slice):
            return tuple(self._records[k] for k in self._indices[i])
        return self._records[self._indices[i]]

    def __iter__(self) -> Iterator[JobView]:
        records = self._records
        return (records[k] for k in self._indices)

    def __bool__(self) -> bool:
        return bool(self._indices)

    @property
    def indices(self) -> Sequence[int]:
        """Trace indices of the waiting jobs in arrival order (read-only)."""
        return self._indices


class Snapshot:
    """The state at one decision point. Valid until the simulator next changes state.

    Policies read it and return actions; they never mutate it. To plan several actions, copy the
    allocation state with :meth:`scratch` and place Cells on the copy: it chooses nodes exactly
    as the simulator will.

    Args:
        now_s: simulated time.
        cluster: the cluster.
        tuner: the cluster's tuner (candidate Cells and estimates).
        records: every job record, by trace index.
        waiting: indices of waiting jobs in arrival order.
        active: indices of jobs holding GPUs (running or paused).
        allocator: the simulator's allocation state (read here, never changed).
        restore_s: checkpoint/restore pause when a job with progress (re)starts.
        future_arrivals: jobs of the trace not yet arrived.
        forker: makes :meth:`fork` (the simulator's ``fork_present``); None: cannot fork.
    """

    def __init__(
        self,
        now_s: float,
        cluster: ClusterSpec,
        tuner: Tuner,
        records: Sequence[JobRecord],
        waiting: Sequence[int],
        active: Mapping[int, None],
        allocator: Allocator,
        restore_s: float,
        future_arrivals: int,
        forker: Callable[[bool], Simulator] | None = None,
    ) -> None:
        self.now_s = now_s
        self.cluster = cluster
        self.tuner = tuner
        self._records = records
        self._waiting = waiting
        self._active = active
        self._allocator = allocator
        self.restore_s = restore_s
        self.future_arrivals = future_arrivals
        self._forker = forker

    @cached_property
    def waiting(self) -> JobQueue:
        """Waiting jobs in arrival order (preempted jobs keep their arrival position).

        A lazy sequence: iterating or indexing it costs only what is read.
        """
        return JobQueue(self._records, self._waiting)

    @cached_property
    def active(self) -> tuple[JobView, ...]:
        """Jobs holding GPUs (running or paused), in arrival order."""
        return tuple(self._records[i] for i in sorted(self._active))

    def holding_back(self, indices: Collection[int]) -> Snapshot:
        """The same state with the waiting jobs ``indices`` left out of :attr:`waiting`.

        For a planner that may not start those jobs at this instant (e.g. an env's jobs that were
        already preempted at this instant): it plans as if they had not arrived yet.
        """
        held = set(indices)
        return Snapshot(
            self.now_s,
            self.cluster,
            self.tuner,
            self._records,
            [i for i in self._waiting if i not in held],
            self._active,
            self._allocator,
            self.restore_s,
            self.future_arrivals,
            self._forker,
        )

    def fork(self, estimated: bool = True) -> Simulator:
        """A simulator continuing from this state with only the jobs already arrived.

        For lookahead: try actions on the copy and run a policy forward, without touching the
        run and without seeing the trace's future (``Simulator.fork_present``). With
        ``estimated`` (default) every job is priced by the scheduler's estimator, not the
        ground truth.

        Raises:
            ConfigError: the snapshot was not made by a simulator (it cannot be forked).
        """
        if self._forker is None:
            from crius_gym.errors import ConfigError

            raise ConfigError("this snapshot cannot be forked (not made by a Simulator)")
        return self._forker(estimated)

    def job(self, index: int) -> JobView:
        """A job by trace index."""
        return self._records[index]

    def free_gpus(self, gpu_type: str) -> int:
        """Free GPUs of a type."""
        return self._allocator.free_gpus(gpu_type)

    def free_per_node(self, gpu_type: str) -> np.ndarray:
        """Free GPUs per node of a type (read-only)."""
        return self._allocator.free_per_node(gpu_type)

    def fits(self, cell: Cell) -> bool:
        """Whether a Cell fits in the free GPUs now."""
        return self._allocator.can_place(cell)

    def scratch(self) -> Allocator:
        """A private copy of the allocation state for planning several actions."""
        return self._allocator.copy()

    def candidates(self, job: Job) -> TunerResult:
        """The tuner's ranked Cells for a job (cached per model and batch)."""
        return self.tuner.tune(job.model, job.global_batch)

    def estimated_iter_time_s(
        self, job: Job, cell: Cell, constraints: PlanConstraints | None = None
    ) -> float | None:
        """The estimator's seconds per iteration of a job on a Cell (None: does not fit)."""
        est = estimated_plan(self.tuner, job, cell, constraints)
        return None if est is None else est.iter_time_s

    def tuning_overhead_s(self, num_gpus: int, mode: TuningMode) -> float:
        """The tuning pause of a (re)start under a tuning mode."""
        if mode == "none":
            return 0.0
        return self.tuner.config.tuning_overhead_s(num_gpus, pruned=mode == "pruned")
