"""The event-driven cluster simulator.

Continuous time; events are arrivals, completions, the end of a pause (tuning / restoring) and
optional ticks, ordered by (time, priority, sequence).  After all events of one instant are
processed, the policy is asked to decide (if an arrival, completion or tick happened).  A job
advances at 1 / (ground-truth seconds per iteration) of its Cell; starting or changing Cell
pauses it for the tuning overhead of the action's tuning mode plus a checkpoint restore when it
has progress; preemption returns it to the queue with its progress.  The simulator knows
nothing about which policy runs: it only applies :mod:`crius_gym.sim.actions`.

The artifact-compatibility options (:class:`~crius_gym.sim.artifact_compat.ArtifactCompat`,
``SimConfig.artifact_compat``) switch to the Crius/Arena artifact's round-based bookkeeping; all
are off by default.

Two ways to drive it: :meth:`Simulator.run` (a policy to completion) and the step API
(:meth:`reset`, :meth:`advance`, :meth:`snapshot`, :meth:`apply`, :meth:`result`) the
Gymnasium environment uses.
"""

from __future__ import annotations

import bisect
import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from crius_gym.errors import ConfigError
from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.tuner import Tuner
from crius_gym.sim.actions import Action, InvalidActionError, Preempt, Reconfigure, Reject, Start
from crius_gym.sim.allocator import Allocator, Placement
from crius_gym.sim.artifact_compat import ArtifactCompat
from crius_gym.sim.events import EventKind, EventQueue
from crius_gym.sim.metrics import JobResult, RunSummary, TimeSeries, job_result, summarise
from crius_gym.sim.policy import Policy, PolicyContext
from crius_gym.sim.records import UNRUNNABLE_REASON, JobRecord, JobStatus
from crius_gym.sim.schedule import Began, Ended, ScheduleLog, Segment
from crius_gym.sim.snapshot import Snapshot
from crius_gym.sim.truth import EstimatorTruth, GroundTruth, estimated_plan
from crius_gym.workload.job import Trace


@dataclass(frozen=True)
class SimConfig:
    """Simulator settings.

    Attributes:
        checkpoint_restore_s: pause when a job with progress restarts or changes Cell, seconds
            (Arena's simulator uses 0).
        record_timeseries: keep the throughput / GPU-use series (off saves memory at scale).
        artifact_compat: the Arena artifact's modelling choices (rounds, progress re-valuation,
            suspension double count, tuning charge); all off by default.
    """

    checkpoint_restore_s: float = 0.0
    record_timeseries: bool = True
    artifact_compat: ArtifactCompat = field(default_factory=ArtifactCompat)

    def __post_init__(self) -> None:
        if self.checkpoint_restore_s < 0:
            raise ConfigError("sim.checkpoint_restore_s must be >= 0")
        if not isinstance(self.artifact_compat, ArtifactCompat):
            raise ConfigError("sim.artifact_compat must be an ArtifactCompat")


@dataclass(frozen=True)
class RunResult:
    """Everything a run produced.

    Attributes:
        policy: policy name.
        trace: trace name.
        jobs: per-job results in trace order.
        summary: per-run metrics.
        series: throughput / GPU use / queue length over time.
        rejections: count per rejection reason.
        segments: the schedule, who held which GPUs when, in the order holds ended (the ones
            still held at the stop last, ``ended="open"``).
    """

    policy: str
    trace: str
    jobs: tuple[JobResult, ...]
    summary: RunSummary
    series: TimeSeries
    rejections: dict[str, int]
    segments: tuple[Segment, ...] = ()


class Simulator:
    """Simulates one cluster.

    Args:
        cluster: the cluster.
        tuner: the cluster's tuner (the scheduler's estimates).
        truth: real iteration times (default: the tuner's estimator).
        config: settings.
    """

    def __init__(
        self,
        cluster: ClusterSpec,
        tuner: Tuner,
        truth: GroundTruth | None = None,
        config: SimConfig | None = None,
    ) -> None:
        if tuner.cluster is not cluster and tuner.cluster != cluster:
            raise ConfigError("the tuner was built for another cluster")
        self.cluster = cluster
        self.tuner = tuner
        self.truth = truth or EstimatorTruth(tuner)
        self.config = config or SimConfig()
        self._compat = self.config.artifact_compat
        self.decisions = 0
        self._trace: Trace | None = None

    # ------------------------------------------------------------------ set-up
    def reset(
        self, trace: Trace, horizon_s: float | None = None, tick_interval_s: float | None = None
    ) -> None:
        """Load a trace and rewind to time 0.

        Under ``artifact_compat.rounds`` each job's arrival moves to the start of its round (the
        artifact's submission time), and its JCT counts from there.

        Args:
            trace: the jobs.
            horizon_s: stop at this simulated time (unfinished jobs are reported as such).
            tick_interval_s: also ask for decisions this often while jobs are active.
        """
        self._compat = self.config.artifact_compat
        if self._compat.rounds:
            trace = _rounded_arrivals(trace, self._compat)
        self._trace = trace
        self._records = [JobRecord(index=i, job=j) for i, j in enumerate(trace.jobs)]
        self._queue = EventQueue()
        for i, j in enumerate(trace.jobs):
            self._queue.push(j.arrival_s, EventKind.ARRIVAL, i)
        self._alloc = Allocator(self.cluster)
        self._waiting: list[int] = []
        self._active: dict[int, None] = {}
        self._future = len(trace.jobs)
        self._open = len(trace.jobs)  # neither finished nor rejected
        self.now_s = 0.0
        self.horizon_s = horizon_s
        self.tick_interval_s = tick_interval_s
        self._tick_pending = False
        self._throughput = 0.0
        self._running = 0
        self._by_id = {j.job_id: i for i, j in enumerate(trace.jobs)}
        self._series: list[tuple[float, float, int, int]] = []
        self._schedule = ScheduleLog()
        self._held: dict[int, tuple[float, Began]] = {}  # job index -> its open segment
        self.decisions = 0
        self._stopped = False
        self._record_point()

    @property
    def done(self) -> bool:
        """No more events to process (or the horizon was reached)."""
        return self._stopped

    @property
    def jobs_in_system(self) -> int:
        """Jobs arrived and neither finished nor rejected (waiting, paused or running)."""
        return len(self._waiting) + len(self._active)

    @property
    def future_arrivals(self) -> int:
        """Jobs of the trace not yet arrived."""
        return self._future

    @property
    def has_future_events(self) -> bool:
        """Whether waiting for the next event can change anything (arrivals or active jobs)."""
        return bool(self._future or self._active)

    @property
    def allocator(self) -> Allocator:
        """The live allocation state (read it; change it only through actions)."""
        return self._alloc

    @property
    def waiting_indices(self) -> Sequence[int]:
        """Trace indices of waiting jobs in arrival order."""
        return self._waiting

    @property
    def active_indices(self) -> Sequence[int]:
        """Trace indices of jobs holding GPUs, in arrival order."""
        return sorted(self._active)

    def holds_gpus(self, index: int) -> bool:
        """Whether the job of trace index ``index`` holds GPUs now (one of ``active_indices``)."""
        return index in self._active

    @property
    def records(self) -> Sequence[JobRecord]:
        """Job records by trace index (read-only use)."""
        return self._records

    # ------------------------------------------------------------------ bookkeeping
    def _touch(self, rec: JobRecord) -> None:
        """Bring a job's accumulators and progress up to ``now_s``."""
        dt = self.now_s - rec.last_update_s
        if dt > 0:
            if rec.status is JobStatus.WAITING:
                rec.queueing_s += dt
            elif rec.status is JobStatus.PAUSED:
                rec.paused_s += dt
            elif rec.status is JobStatus.RUNNING:
                rec.running_s += dt
                if self._compat.revalue:
                    rec.exec_s += dt
                    self._revalue(rec)
                else:
                    rec.progress_iters = min(
                        float(rec.job.iterations), rec.progress_iters + dt / rec.iter_time_s
                    )
        rec.last_update_s = self.now_s

    @staticmethod
    def _revalue(rec: JobRecord) -> None:
        """Progress as the artifact values it: executed seconds at the current speed."""
        rec.progress_iters = min(
            float(rec.job.iterations), rec.base_iters + rec.exec_s / rec.iter_time_s
        )

    def _record_point(self) -> None:
        if not self.config.record_timeseries:
            return
        point = (
            self.now_s,
            max(0.0, self._throughput),
            self._alloc.busy_gpus(),
            len(self._waiting),
        )
        if self._series and self._series[-1][0] == self.now_s:
            self._series[-1] = point
        else:
            self._series.append(point)

    def _set_running(self, rec: JobRecord) -> None:
        rec.status = JobStatus.RUNNING
        self._running += 1
        self._throughput += rec.job.global_batch / rec.iter_time_s
        self._schedule_completion(rec)

    def _schedule_completion(self, rec: JobRecord) -> None:
        """Queue the finish of a job that just began iterating (its analytic completion).

        The hook a runtime's ledger overrides: there, workers report completions instead.
        """
        if self._compat.revalue:
            # Uncapped: work re-valued past the target finishes at once.
            left = (rec.job.iterations - rec.base_iters) * rec.iter_time_s - rec.exec_s
            finish = self.now_s + max(0.0, left)
        else:
            finish = self.now_s + rec.remaining_iters * rec.iter_time_s
        if self._compat.rounds:
            finish = self._compat.completion_s(self.now_s, finish)
        self._queue.push(finish, EventKind.COMPLETION, rec.index, rec.version)

    def _stop_running(self, rec: JobRecord) -> None:
        if rec.status is JobStatus.RUNNING:
            self._running -= 1
            # Reset when idle so float drift of the running sum never accumulates.
            self._throughput = (
                self._throughput - rec.job.global_batch / rec.iter_time_s if self._running else 0.0
            )

    def _schedule_tick(self) -> None:
        if self.tick_interval_s and not self._tick_pending and (self._active or self._future):
            t = self.now_s + self.tick_interval_s
            if self._compat.rounds:
                t = self._compat.next_boundary_s(t)
            self._queue.push(t, EventKind.TICK)
            self._tick_pending = True

    # ------------------------------------------------------------------ events
    def advance(self) -> bool:
        """Process every event of the next instant that has any.

        Returns:
            True at a decision point (an arrival, completion or tick happened); False when the
            run is over (no events left, or the horizon passed).
        """
        while True:
            t = self._queue.peek_time()
            if t is None or (self.horizon_s is not None and t > self.horizon_s):
                if self.horizon_s is not None and t is not None:
                    self.now_s = self.horizon_s
                self._stopped = True
                self._record_point()
                return False
            if self._process_instant(t):
                return True

    def _process_instant(self, t: float) -> bool:
        """Move the clock to ``t`` and process every event queued for it.

        Returns:
            Whether a decision is due (an arrival, completion or tick happened).
        """
        self.now_s = t
        trigger = False
        while self._queue.peek_time() == t:
            ev = self._queue.pop()
            if ev.kind is EventKind.TICK:
                self._tick_pending = False
                trigger = True
                continue
            rec = self._records[ev.job_index]
            if ev.kind is EventKind.ARRIVAL:
                self._arrive(rec)
                trigger = True
            elif ev.version != rec.version:
                continue  # cancelled by a later change
            elif ev.kind is EventKind.COMPLETION:
                self._complete(rec)
                trigger = True
            else:
                self._touch(rec)
                self._set_running(rec)
        self._schedule_tick()
        self._record_point()
        return trigger

    def _arrive(self, rec: JobRecord) -> None:
        self._future -= 1
        rec.last_update_s = self.now_s
        if not self.tuner.tune(rec.job.model, rec.job.global_batch).feasible:
            rec.status = JobStatus.REJECTED
            rec.reject_reason = UNRUNNABLE_REASON
            self._open -= 1
            return
        rec.status = JobStatus.WAITING
        rec.waiting_since_s = self.now_s
        bisect.insort(self._waiting, rec.index)

    def _complete(self, rec: JobRecord) -> None:
        self._touch(rec)
        rec.progress_iters = float(rec.job.iterations)
        self._stop_running(rec)
        rec.status = JobStatus.FINISHED
        rec.finish_s = self.now_s
        assert rec.placement is not None
        self._close_segment(rec, rec.placement, "finish")
        self._alloc.release(rec.placement)
        del self._active[rec.index]
        self._open -= 1
        rec.version += 1

    # ------------------------------------------------------------------ actions
    def snapshot(self) -> Snapshot:
        """The state for a policy's decision (:meth:`Snapshot.fork` is :meth:`fork_present`)."""
        return Snapshot(
            self.now_s,
            self.cluster,
            self.tuner,
            self._records,
            self._waiting,
            self._active,
            self._alloc,
            self.config.checkpoint_restore_s,
            self._future,
            self.fork_present,
        )

    def _index(self, job_id: str) -> JobRecord:
        try:
            return self._records[self._by_id[job_id]]
        except KeyError:
            raise InvalidActionError(f"unknown job {job_id!r}") from None

    def apply(self, actions: Sequence[Action]) -> None:
        """Apply actions in order.

        Raises:
            InvalidActionError: an action is impossible now (the state is unchanged by it).
        """
        for action in actions:
            rec = self._index(action.job_id)
            if isinstance(action, Start):
                self._start(rec, action)
            elif isinstance(action, Reconfigure):
                self._reconfigure(rec, action)
            elif isinstance(action, Preempt):
                self._preempt(rec)
            elif isinstance(action, Reject):
                self._reject(rec, action.reason)
            else:
                raise InvalidActionError(f"unknown action {action!r}")
        self._schedule_tick()
        self._record_point()

    def _pause_or_run(self, rec: JobRecord, overhead_s: float) -> None:
        if overhead_s > 0:
            rec.status = JobStatus.PAUSED
            rec.resume_at_s = self.now_s + overhead_s
            self._queue.push(rec.resume_at_s, EventKind.RESUME, rec.index, rec.version)
        else:
            self._set_running(rec)

    def _overhead_s(self, rec: JobRecord, num_gpus: int, tuning: str) -> float:
        tune = (
            0.0
            if tuning == "none"
            else self.tuner.config.tuning_overhead_s(num_gpus, pruned=tuning == "pruned")
        )
        restore = self.config.checkpoint_restore_s if rec.progress_iters > 0 else 0.0
        if self._compat.tuning_charge == "artifact":
            return self._compat.tuning_pause_s(tune + restore)
        return tune + restore

    def start_time_s(self, rec: JobRecord, action: Start | Reconfigure) -> float | None:
        """Ground-truth seconds per iteration of an action's Cell (None: cannot run there)."""
        return self.truth.iter_time_s(rec.job, action.cell, action.constraints)

    def _start(self, rec: JobRecord, action: Start) -> None:
        if rec.status is not JobStatus.WAITING:
            raise InvalidActionError(f"Start {rec.job.job_id}: job is {rec.status.value}")
        real = self.start_time_s(rec, action)
        if real is None:
            raise InvalidActionError(f"Start {rec.job.job_id}: no plan fits {action.cell}")
        placement = self._alloc.place(action.cell)
        if placement is None:
            raise InvalidActionError(f"Start {rec.job.job_id}: {action.cell} does not fit now")
        self._touch(rec)
        self._waiting.pop(bisect.bisect_left(self._waiting, rec.index))
        self._active[rec.index] = None
        if rec.first_start_s is None:
            rec.first_start_s = self.now_s
        rec.starts += 1
        self._assign(rec, action, placement, real)
        self._held[rec.index] = (self.now_s, "start" if rec.starts == 1 else "resume")

    def _reconfigure(self, rec: JobRecord, action: Reconfigure) -> None:
        if rec.status not in (JobStatus.RUNNING, JobStatus.PAUSED):
            raise InvalidActionError(f"Reconfigure {rec.job.job_id}: job is {rec.status.value}")
        real = self.start_time_s(rec, action)
        if real is None:
            raise InvalidActionError(f"Reconfigure {rec.job.job_id}: no plan fits {action.cell}")
        assert rec.placement is not None
        old = rec.placement
        self._alloc.release(old)
        placement = self._alloc.place(action.cell)
        if placement is None:
            self._alloc.take(old)
            raise InvalidActionError(f"Reconfigure {rec.job.job_id}: {action.cell} does not fit")
        self._touch(rec)
        self._stop_running(rec)
        rec.reconfigurations += 1
        self._close_segment(rec, old, "reconfigure")
        self._assign(rec, action, placement, real)
        self._held[rec.index] = (self.now_s, "reconfigure")

    def _assign(
        self,
        rec: JobRecord,
        action: Start | Reconfigure,
        placement: Placement,
        real_iter_time_s: float,
    ) -> None:
        """Put a job on a Cell: its plan, speeds, and the pause before it iterates."""
        est = estimated_plan(self.tuner, rec.job, action.cell, action.constraints)
        rec.cell, rec.constraints, rec.placement = action.cell, action.constraints, placement
        rec.last_cell = action.cell
        rec.iter_time_s = real_iter_time_s
        rec.estimated_iter_time_s = est.iter_time_s if est is not None else real_iter_time_s
        if self._compat.revalue:
            self._revalue(rec)  # the artifact re-prices every executed second at the new speed
        rec.version += 1
        self._pause_or_run(rec, self._overhead_s(rec, placement.num_gpus, action.tuning))

    def _preempt(self, rec: JobRecord) -> None:
        if rec.status not in (JobStatus.RUNNING, JobStatus.PAUSED):
            raise InvalidActionError(f"Preempt {rec.job.job_id}: job is {rec.status.value}")
        self._touch(rec)
        self._stop_running(rec)
        if self._compat.revalue:
            # The artifact lowers the target to what remains; it keeps the executed seconds
            # (and so counts them again after the restart) unless the double count is off.
            rec.base_iters = rec.progress_iters
            if not self._compat.suspend_double_count:
                rec.exec_s = 0.0
        self._requeue(rec, "preempt")
        rec.preemptions += 1

    def _requeue(self, rec: JobRecord, ended: Ended) -> None:
        """Take a stopped job off its GPUs and back to the queue, its progress as it stands.

        Args:
            rec: the job (its running accounting already stopped).
            ended: how its segment ends (``preempt``; a runtime's ``failed``).
        """
        assert rec.placement is not None
        self._close_segment(rec, rec.placement, ended)
        self._alloc.release(rec.placement)
        del self._active[rec.index]
        rec.placement = None
        rec.cell, rec.constraints = None, None
        rec.iter_time_s = rec.estimated_iter_time_s = 0.0
        rec.status = JobStatus.WAITING
        rec.waiting_since_s = self.now_s
        rec.version += 1  # cancels its pending events
        bisect.insort(self._waiting, rec.index)

    def _segment(self, rec: JobRecord, placement: Placement, ended: Ended) -> Segment:
        start_s, began = self._held[rec.index]
        return Segment(
            job_index=rec.index,
            job_id=rec.job.job_id,
            gpu_type=placement.gpu_type,
            nodes=placement.nodes,
            gpus_per_node=placement.gpus_per_node,
            start_s=start_s,
            end_s=self.now_s,
            began=began,
            ended=ended,
        )

    def _close_segment(self, rec: JobRecord, placement: Placement, ended: Ended) -> None:
        self._schedule.append(self._segment(rec, placement, ended))
        del self._held[rec.index]

    def _reject(self, rec: JobRecord, reason: str) -> None:
        if rec.status is not JobStatus.WAITING:
            raise InvalidActionError(f"Reject {rec.job.job_id}: job is {rec.status.value}")
        self._touch(rec)
        self._waiting.pop(bisect.bisect_left(self._waiting, rec.index))
        rec.status = JobStatus.REJECTED
        rec.reject_reason = reason
        self._open -= 1
        rec.version += 1

    #: What :meth:`state` leaves out: shared, rebuilt the same way by any simulator of the
    #: same scenario.
    _SHARED = ("cluster", "tuner", "truth", "config")

    def state(self) -> dict[str, object]:
        """The run so far as picklable data (without the cluster, tuner, truth and settings)."""
        return _copy_run({k: v for k, v in self.__dict__.items() if k not in self._SHARED})

    def restore_state(self, state: dict[str, object]) -> None:
        """Continue the run another simulator of the same scenario saved with :meth:`state`."""
        self.__dict__.update(_copy_run(state))

    def clone(self) -> Simulator:
        """An independent copy of the run so far (the cluster, tuner and truth are shared).

        The copy continues from the same instant with its own records, events and allocation,
        so a policy can be tried on it without touching this run (e.g. a rollout that asks what
        an action would have cost).
        """
        other = Simulator.__new__(Simulator)
        shared = {k: v for k, v in self.__dict__.items() if k in self._SHARED}
        other.__dict__ = {
            **shared,
            **_copy_run({k: v for k, v in self.__dict__.items() if k not in self._SHARED}),
        }
        return other

    def fork_present(self, estimated: bool = True) -> Simulator:
        """A copy of the run that knows only what a scheduler can know now.

        The copy holds the jobs already arrived and no pending arrival (the trace's future is
        dropped), and, with ``estimated``, prices every job by the scheduler's estimator instead
        of the ground truth: running jobs continue at their estimated speed from their current
        progress (their completions are rescheduled), and later starts use the estimator. A
        lookahead scheduler rolls its candidate actions out on such copies, so its decision is a
        function of what it observes (a scenario with measured ground truth does not leak it).

        Args:
            estimated: price jobs by the estimator (default) rather than the ground truth.
        """
        other = self.clone()
        other._queue = other._queue.without(EventKind.ARRIVAL)
        # Jobs arrive in trace order, so the future is a suffix: cut it off the records and the
        # trace, so nothing in the copy can tell what comes next.
        arrived = len(other._records) - self._future
        other._records = other._records[:arrived]
        assert other._trace is not None
        other._trace = replace(other._trace, jobs=other._trace.jobs[:arrived])
        other._open -= self._future
        other._future = 0
        if estimated and not isinstance(other.truth, EstimatorTruth):
            other.truth = EstimatorTruth(other.tuner)
            for i in other._active:
                rec = other._records[i]
                if rec.estimated_iter_time_s <= 0 or rec.estimated_iter_time_s == rec.iter_time_s:
                    continue
                running = rec.status is JobStatus.RUNNING
                other._touch(rec)
                other._stop_running(rec)
                rec.iter_time_s = rec.estimated_iter_time_s
                if running:
                    rec.version += 1  # cancels the completion scheduled at the true speed
                    other._set_running(rec)
        other.tick_interval_s = self.tick_interval_s
        return other

    # ------------------------------------------------------------------ results
    def result(self, policy_name: str = "") -> RunResult:
        """Collect metrics as of now (at the end of a run, or at any stop).

        Side-effect free: the accumulators are settled on copies of the records, so peeking
        mid-run leaves the run exactly as it was (settling the originals would re-base their
        progress arithmetic and could change later decisions by rounding).
        """
        assert self._trace is not None, "reset() first"
        records = [copy.copy(r) for r in self._records]
        for rec in records:
            if rec.status not in (JobStatus.FUTURE, JobStatus.FINISHED, JobStatus.REJECTED):
                self._touch(rec)
        jobs = tuple(job_result(r) for r in records)
        # A finished run ends at its last event: the last finish, or the last arrival (a job
        # that arrives after the last finish and is rejected still arrived in the run).
        ends = [r.finish_s for r in records if r.finish_s is not None]
        ends += [r.job.arrival_s for r in records if r.status is JobStatus.REJECTED]
        open_jobs = any(r.status not in (JobStatus.FINISHED, JobStatus.REJECTED) for r in records)
        end = self.now_s if open_jobs or not ends else max(ends)
        arr = np.array(self._series, dtype=float) if self._series else np.zeros((0, 4))
        series = TimeSeries(
            time_s=arr[:, 0],
            throughput=arr[:, 1],
            busy_gpus=arr[:, 2].astype(np.int64),
            queue_length=arr[:, 3].astype(np.int64),
        )
        summary = summarise(list(jobs), series, self.cluster.num_gpus, end, self.decisions)
        reasons: dict[str, int] = {}
        for r in records:
            if r.status is JobStatus.REJECTED:
                reasons[r.reject_reason] = reasons.get(r.reject_reason, 0) + 1
        still_held = [
            self._segment(records[i], p, "open")
            for i in self._held
            if (p := records[i].placement) is not None
        ]
        return RunResult(
            policy=policy_name,
            trace=self._trace.name,
            jobs=jobs,
            summary=summary,
            series=series,
            rejections=reasons,
            segments=(*self._schedule, *still_held),
        )

    def time_in_system_s(self) -> float:
        """Σ over the jobs of ``result()`` that are not rejected of their time in the system (s).

        A finished job counts finish − arrival, any other (waiting, running) end − arrival,
        with ``end`` the makespan ``result()`` reports; jobs arriving after it are left out.
        The same number, term by term and in the same order, as summing ``result()``'s jobs,
        without building the result (a vine rollout asks for this once per action).
        """
        records = self._records
        finished, rejected = JobStatus.FINISHED, JobStatus.REJECTED
        ends = [r.finish_s for r in records if r.finish_s is not None]
        ends += [r.job.arrival_s for r in records if r.status is rejected]
        open_jobs = any(r.status is not finished and r.status is not rejected for r in records)
        end = self.now_s if open_jobs or not ends else max(ends)
        return sum(
            (r.finish_s if r.status is finished and r.finish_s is not None else end)
            - r.job.arrival_s
            for r in records
            if r.status is not rejected and r.job.arrival_s <= end
        )

    def run(
        self,
        trace: Trace,
        policy: Policy,
        *,
        seed: int = 0,
        horizon_s: float | None = None,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> RunResult:
        """Run a policy over a trace until every job finished or was rejected (or the horizon).

        Args:
            trace: the jobs.
            policy: the scheduler.
            seed: seeds the policy's random generator.
            horizon_s: optional stop time.
            on_progress: called as ``on_progress(done_jobs, total_jobs)`` after each decision.
        """
        self.reset(trace, horizon_s, policy.tick_interval_s)
        policy.reset(PolicyContext(self.cluster, self.tuner, np.random.default_rng(seed)))
        total = len(trace.jobs)
        while self.advance():
            self.decisions += 1
            actions = policy.decide(self.snapshot())
            if actions:
                self.apply(actions)
            if on_progress is not None:
                on_progress(total - self._open, total)
        return self.result(policy.name)


def _rounded_arrivals(trace: Trace, compat: ArtifactCompat) -> Trace:
    """The trace with each arrival at the start of its round (order is kept: monotone)."""
    jobs = tuple(replace(j, arrival_s=compat.round_start_s(j.arrival_s)) for j in trace.jobs)
    return replace(trace, jobs=jobs)


#: Job states after which the simulator never changes a record.
_SETTLED = frozenset({JobStatus.FINISHED, JobStatus.REJECTED})
#: Run attributes that are immutable once the run is reset, so copies share them.
_IMMUTABLE_RUN = frozenset({"_trace", "_by_id", "_compat"})
#: Run attributes whose own ``copy()`` is an independent copy (their items are immutable).
_COPYABLE_RUN = frozenset({"_alloc", "_queue", "_waiting", "_active", "_series", "_held"})


def _copy_run(attrs: dict[str, object]) -> dict[str, object]:
    """An independent copy of a simulator's run attributes, without a generic deep copy.

    A vine rollout copies the run for every action it evaluates, and ``copy.deepcopy`` walked
    every record's job and model. Records hold only immutable values (jobs, Cells, placements
    and numbers are frozen or scalars), so each is copied shallowly; the allocator and the event
    queue copy themselves; the containers of indices are copied; the trace, the id index and
    the compatibility settings are shared (never changed after reset). Anything else is deep
    copied, so an attribute added later stays safe.
    """
    out: dict[str, object] = {}
    memo: dict[int, object] = {}
    for key, value in attrs.items():
        if key in _IMMUTABLE_RUN:
            out[key] = value
        elif key == "_records":
            # A finished or rejected record never changes again: shared, not copied (a
            # lookahead forks a long run for every candidate action).
            done = _SETTLED
            out[key] = [r if r.status in done else copy.copy(r) for r in value]  # type: ignore[attr-defined]
        elif isinstance(value, Allocator | EventQueue | list | dict) and key in _COPYABLE_RUN:
            out[key] = value.copy()
        else:
            out[key] = copy.deepcopy(value, memo)
    return out
