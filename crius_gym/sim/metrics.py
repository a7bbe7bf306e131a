"""Run metrics: per job, per run, and a time series of throughput and GPU use.

JCT = finish − arrival over finished jobs; queueing delay = time spent waiting for GPUs
(including after preemption); throughput = time average of Σ samples/s of iterating jobs.
Unfinished jobs are counted as such and never padded into the JCT (docs/baselines.md,
"Averages are not padded").
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from crius_gym.sim.records import UNRUNNABLE_REASON, JobRecord, JobStatus


@dataclass(frozen=True)
class JobResult:
    """Outcome of one job.

    Attributes:
        job_id: the job.
        model: model name.
        global_batch: samples per iteration.
        iterations: iterations asked for.
        status: ``finished``, ``rejected`` or ``unfinished``.
        arrival_s: submission time.
        first_start_s: first time it got GPUs (NaN if never).
        finish_s: completion time (NaN unless finished).
        jct_s: finish − arrival (NaN unless finished).
        queueing_s: time waiting for GPUs.
        paused_s: time holding GPUs while tuning or restoring.
        running_s: time iterating.
        progress_iters: iterations done.
        preemptions: times preempted.
        reconfigurations: times moved to another Cell while running.
        gpu_type: last GPU type ("" if never started).
        num_gpus: last GPU count (0 if never started).
        requested_gpus: the request (0 if none).
        requested_gpu_type: the request ("" if none).
        reject_reason: why it was rejected ("" otherwise).
    """

    job_id: str
    model: str
    global_batch: int
    iterations: int
    status: str
    arrival_s: float
    first_start_s: float
    finish_s: float
    jct_s: float
    queueing_s: float
    paused_s: float
    running_s: float
    progress_iters: float
    preemptions: int
    reconfigurations: int
    gpu_type: str
    num_gpus: int
    requested_gpus: int
    requested_gpu_type: str
    reject_reason: str


def job_result(rec: JobRecord) -> JobResult:
    """The result row of a job record (call after the run's clock has been settled)."""
    status = {JobStatus.FINISHED: "finished", JobStatus.REJECTED: "rejected"}.get(
        rec.status, "unfinished"
    )
    nan = math.nan
    return JobResult(
        job_id=rec.job.job_id,
        model=rec.job.model.name,
        global_batch=rec.job.global_batch,
        iterations=rec.job.iterations,
        status=status,
        arrival_s=rec.job.arrival_s,
        first_start_s=nan if rec.first_start_s is None else rec.first_start_s,
        finish_s=nan if rec.finish_s is None else rec.finish_s,
        jct_s=nan if rec.finish_s is None else rec.finish_s - rec.job.arrival_s,
        queueing_s=rec.queueing_s,
        paused_s=rec.paused_s,
        running_s=rec.running_s,
        progress_iters=rec.progress_iters,
        preemptions=rec.preemptions,
        reconfigurations=rec.reconfigurations,
        gpu_type=rec.last_cell.gpu_type if rec.last_cell else "",
        num_gpus=rec.last_cell.num_gpus if rec.last_cell else 0,
        requested_gpus=rec.job.requested_gpus or 0,
        requested_gpu_type=rec.job.requested_gpu_type or "",
        reject_reason=rec.reject_reason,
    )


@dataclass(frozen=True)
class TimeSeries:
    """Piecewise-constant cluster state: value ``[i]`` holds on ``[time_s[i], time_s[i+1])``.

    Attributes:
        time_s: change points.
        throughput: Σ samples/s of iterating jobs.
        busy_gpus: GPUs allocated (iterating or paused).
        queue_length: jobs waiting.
    """

    time_s: np.ndarray
    throughput: np.ndarray
    busy_gpus: np.ndarray
    queue_length: np.ndarray

    def time_average(self, values: np.ndarray, end_s: float, start_s: float = 0.0) -> float:
        """Average of a series over ``[start_s, end_s]``."""
        if end_s <= start_s or len(self.time_s) == 0:
            return 0.0
        t = np.clip(np.append(self.time_s, end_s), start_s, end_s)
        return float(np.sum(values * np.diff(t)) / (end_s - start_s))

    def to_frame(self) -> pd.DataFrame:
        """As a table."""
        return pd.DataFrame(
            {
                "time_s": self.time_s,
                "throughput": self.throughput,
                "busy_gpus": self.busy_gpus,
                "queue_length": self.queue_length,
            }
        )


@dataclass(frozen=True)
class RunSummary:
    """Per-run metrics (unpadded: averages over finished jobs only).

    Attributes:
        jobs: jobs in the trace.
        arrived: jobs that had arrived when the run stopped.
        finished: jobs that finished.
        rejected: jobs rejected (never runnable, or given up by the policy).
        unfinished: jobs neither finished nor rejected when the run stopped (including those
            not yet arrived at a horizon: ``jobs - arrived`` of them).
        avg_jct_s: mean JCT of finished jobs.
        avg_jct_censored_s: mean JCT of every arrived job a policy could have run: finished
            jobs count their JCT; unfinished ones and those the policy gave up (rejected) count
            the time from arrival to the end of the run (censored there: a lower bound of
            their JCT), so dropping jobs never lowers it. Jobs no Cell can hold (rejected on
            arrival under every policy) and jobs not yet arrived are left out. Equal to
            ``avg_jct_s`` when every job finished.
        p50_jct_s: median JCT.
        p95_jct_s: 95th percentile JCT.
        p99_jct_s: 99th percentile JCT.
        avg_queueing_s: mean queueing delay of finished jobs.
        p95_queueing_s: 95th percentile queueing delay.
        avg_first_start_delay_s: mean time from arrival to first GPUs (finished jobs).
        avg_throughput: time-averaged Σ samples/s over [0, makespan].
        avg_gpu_utilization: time-averaged fraction of GPUs allocated.
        makespan_s: last finish (or the stop time when jobs are unfinished).
        reconfigurations: Cell changes of running jobs.
        preemptions: preemptions.
        decisions: policy calls.
    """

    jobs: int
    arrived: int
    finished: int
    rejected: int
    unfinished: int
    avg_jct_s: float
    avg_jct_censored_s: float
    p50_jct_s: float
    p95_jct_s: float
    p99_jct_s: float
    avg_queueing_s: float
    p95_queueing_s: float
    avg_first_start_delay_s: float
    avg_throughput: float
    avg_gpu_utilization: float
    makespan_s: float
    reconfigurations: int
    preemptions: int
    decisions: int

    def as_dict(self) -> dict[str, float | int]:
        """Plain mapping."""
        return asdict(self)


def summarise(
    results: list[JobResult], series: TimeSeries, total_gpus: int, end_s: float, decisions: int
) -> RunSummary:
    """Per-run metrics from job results and the time series up to ``end_s``."""
    fin = [r for r in results if r.status == "finished"]
    jct = np.array([r.jct_s for r in fin], dtype=float)
    queue = np.array([r.queueing_s for r in fin], dtype=float)
    first = np.array([r.first_start_s - r.arrival_s for r in fin], dtype=float)

    # Censored at the run's end: finished jobs their JCT; arrived jobs still open or given up by
    # the policy the time they waited or ran until the end (see RunSummary).
    counted = [
        r.jct_s if r.status == "finished" else end_s - r.arrival_s
        for r in results
        if r.arrival_s <= end_s and r.reject_reason != UNRUNNABLE_REASON
    ]
    censored = np.array(counted, dtype=float)

    def pct(a: np.ndarray, q: float) -> float:
        return float(np.percentile(a, q)) if len(a) else math.nan

    def mean(a: np.ndarray) -> float:
        return float(a.mean()) if len(a) else math.nan

    return RunSummary(
        jobs=len(results),
        arrived=sum(r.arrival_s <= end_s for r in results),
        finished=len(fin),
        rejected=sum(r.status == "rejected" for r in results),
        unfinished=sum(r.status == "unfinished" for r in results),
        avg_jct_s=mean(jct),
        avg_jct_censored_s=mean(censored),
        p50_jct_s=pct(jct, 50),
        p95_jct_s=pct(jct, 95),
        p99_jct_s=pct(jct, 99),
        avg_queueing_s=mean(queue),
        p95_queueing_s=pct(queue, 95),
        avg_first_start_delay_s=mean(first),
        avg_throughput=series.time_average(series.throughput, end_s),
        avg_gpu_utilization=series.time_average(series.busy_gpus, end_s) / total_gpus,
        makespan_s=end_s,
        reconfigurations=sum(r.reconfigurations for r in results),
        preemptions=sum(r.preemptions for r in results),
        decisions=decisions,
    )
