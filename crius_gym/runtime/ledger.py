"""The runtime's control-plane state: the simulator's bookkeeping, driven by the wall clock.

A scheduler that runs a real cluster keeps the same books as the simulator (who waits, who holds
which GPUs, progress as last reported, the schedule so far) but does not decide when jobs finish:
its workers tell it. :class:`Ledger` is a :class:`~crius_gym.sim.simulator.Simulator` whose
completions are never predicted: time moves to the wall clock's reading
(:meth:`Ledger.advance_to`), and finishes, failures and measured progress come from the workers
(:meth:`Ledger.complete`, :meth:`Ledger.fail`, :meth:`Ledger.set_progress`). Everything a policy
reads (:meth:`snapshot`, :meth:`fork_present` for lookahead) and every result (:meth:`result`,
the schedule, the time series) is then the simulator's own code, so a difference between a run
here and in the simulator comes from what happened on the cluster, not from two bookkeepers.
"""

from __future__ import annotations

from crius_gym.sim.allocator import Placement
from crius_gym.sim.records import JobRecord, JobStatus
from crius_gym.sim.simulator import Simulator


class Ledger(Simulator):
    """A simulator whose clock and completions come from outside (see the module docstring).

    Built like a :class:`Simulator` (same cluster, tuner, truth and settings); call
    :meth:`reset` with the trace, then alternate :meth:`advance_to` and the worker reports.
    """

    def _schedule_completion(self, rec: JobRecord) -> None:
        """Workers report completions: nothing is predicted."""

    def advance_to(self, now_s: float) -> bool:
        """Process the arrivals, pause ends and ticks due by ``now_s``, then move the clock there.

        Args:
            now_s: the current scenario time (never earlier than the clock).

        Returns:
            Whether a decision is due (an arrival or a tick happened).
        """
        trigger = False
        while (t := self._queue.peek_time()) is not None and t <= now_s:
            trigger = self._process_instant(t) or trigger
        if now_s > self.now_s:
            self.now_s = now_s
            self._record_point()
        return trigger

    @property
    def next_event_s(self) -> float | None:
        """Scenario time of the next arrival, pause end or tick (None: none queued)."""
        return self._queue.peek_time()

    @property
    def open_jobs(self) -> int:
        """Jobs neither finished nor rejected (including those not yet arrived)."""
        return self._open

    def set_progress(self, index: int, progress_iters: float) -> None:
        """Take a worker's report of a job's progress as of now (its books follow the worker).

        Args:
            index: the job's trace index.
            progress_iters: iterations done, as the worker measured them.
        """
        rec = self._records[index]
        self._touch(rec)
        rec.progress_iters = min(float(rec.job.iterations), max(0.0, progress_iters))

    def complete(self, index: int) -> None:
        """A worker reported that the job of trace ``index`` finished (now)."""
        self._complete(self._records[index])
        self._record_point()

    def fail(self, index: int, checkpoint_iters: float) -> float:
        """A job lost its workers (a node or worker died): back to the queue from its checkpoint.

        Unlike a preemption, the work since the job's last checkpoint is lost.

        Args:
            index: the job's trace index.
            checkpoint_iters: iterations saved in its last checkpoint.

        Returns:
            Iterations lost (progress at the failure minus the checkpoint's).
        """
        rec = self._records[index]
        self._touch(rec)
        self._stop_running(rec)
        lost = max(0.0, rec.progress_iters - checkpoint_iters)
        saved = min(rec.progress_iters, max(0.0, checkpoint_iters))
        self._requeue(rec, "failed")
        rec.progress_iters = saved
        self._record_point()
        return lost

    def take_offline(self, gpu_type: str, node: int) -> None:
        """Mark a node lost: its GPUs are never offered again (call after failing its jobs).

        Args:
            gpu_type: the node's GPU type.
            node: its index among the nodes of that type.
        """
        free = int(self._alloc.free_per_node(gpu_type)[node])
        if free:
            self._alloc.take(Placement(gpu_type, (node,), free))
        self._record_point()

    def fork_present(self, estimated: bool = True) -> Simulator:
        """A plain simulator continuing from now with the jobs present (for lookahead).

        The ledger predicts no completions, so the copy's running jobs get theirs here.
        """
        other = super().fork_present(estimated)
        for i in list(other._active):
            rec = other._records[i]
            if rec.status is JobStatus.RUNNING:
                other._touch(rec)
                rec.version += 1  # drops a completion the re-pricing above may have queued
                other._schedule_completion(rec)
        return other
