"""Tiresias-style discretised two-dimensional least attained service (Gu et al., NSDI'19).

A job's attained service is the GPU-seconds it has held (Σ GPUs × time holding them, pauses
included), tracked by the policy from its own decisions.  Thresholds split jobs into priority
queues (``2D-LAS``: service counts both GPUs and time); a new job enters queue 0 and is demoted
when its service crosses the next threshold.  Inside a queue, running jobs come before waiting
ones and each group is in order of entry into the queue (FIFO), as in Tiresias's ``dlas-gpu``.
At each decision the jobs are visited in priority order: a waiting job starts on its requested
GPU type and count if it fits, else it preempts running jobs of lower priority on that type
(lowest first, as few as needed); jobs that cannot be placed are skipped, not blocking the queue.
An optional starvation guard (Tiresias's ``solve_starvation``) sends a waiting job back to queue
0 with its service reset once it has waited ``starvation_factor`` × its executed time.

Like FCFS, a job runs only on its request, and a job whose data-parallel replica does not fit
there is rejected; it runs "+AP" by default (see :mod:`crius_gym.policies.data_parallel`).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

from crius_gym.policies.data_parallel import Launch, StateKey, first_fitting, launches, state_key
from crius_gym.policies.placement import requested_allocation
from crius_gym.policies.registry import register
from crius_gym.sim.actions import Action, Preempt, Reject, Start
from crius_gym.sim.allocator import Allocator
from crius_gym.sim.policy import PolicyContext
from crius_gym.sim.records import JobView
from crius_gym.sim.snapshot import Snapshot

#: Priority sort key: (queue, waiting?, entry into the queue [s], trace index).
Priority = tuple[int, int, float, int]


@register("las")
class LAS:
    """Discretised 2D least-attained-service with priority queues and preemption (Tiresias).

    Args:
        thresholds_gpu_s: attained-service thresholds between queues, GPU-seconds, increasing
            (default 1, 10 and 100 GPU-hours: four queues).
        tick_s: re-evaluate this often (default 300 s, the Crius artifact's round), so that jobs
            crossing a threshold are demoted; a tick is skipped when nothing happened and no
            job crossed a threshold or became due for promotion since the last decision.
        starvation_factor: promote a waiting job to queue 0 (service reset) after it has waited
            this many times its executed time; None disables the guard (Tiresias's default).
        auto_parallel: run the layout's best plan, paying the unpruned tuning ("+AP", default);
            False runs data parallelism untuned.
    """

    name = "las"

    def __init__(
        self,
        thresholds_gpu_s: Sequence[float] = (3600.0, 36_000.0, 360_000.0),
        tick_s: float | None = 300.0,
        starvation_factor: float | None = None,
        auto_parallel: bool = True,
    ) -> None:
        self.thresholds_gpu_s = tuple(float(x) for x in thresholds_gpu_s)
        if any(
            b <= a for a, b in zip(self.thresholds_gpu_s, self.thresholds_gpu_s[1:], strict=False)
        ):
            raise ValueError(f"las: thresholds_gpu_s={thresholds_gpu_s} must increase")
        if starvation_factor is not None and starvation_factor <= 0:
            raise ValueError("las: starvation_factor must be > 0 or None")
        self.tick_interval_s = tick_s
        self.starvation_factor = starvation_factor
        self.auto_parallel = auto_parallel
        self._service: dict[int, float] = {}  # GPU-seconds attained as of _held[i][1]
        self._held: dict[int, tuple[int, float]] = {}  # job → (GPUs held, since when [s])
        self._queue: dict[int, tuple[int, float]] = {}  # job → (queue, entry time [s])
        self._options: dict[int, list[Launch]] = {}
        self._expected: StateKey | None = None
        self._next_change_s = math.inf

    def reset(self, context: PolicyContext) -> None:
        """Forget the previous run's jobs and service."""
        self._service, self._held, self._queue, self._options = {}, {}, {}, {}
        self._expected = None
        self._next_change_s = math.inf

    # ------------------------------------------------------------------ service and priority
    def _attained(self, index: int, now_s: float) -> float:
        held = self._held.get(index)
        extra = held[0] * (now_s - held[1]) if held is not None else 0.0
        return self._service.get(index, 0.0) + extra

    def _settle(self, snapshot: Snapshot) -> None:
        """Bring every job's service up to now; forget jobs that left."""
        now = snapshot.now_s
        active = {v.index: v for v in snapshot.active}
        for i in [i for i in self._held if i not in active]:  # finished (or moved by others)
            self._service[i] = self._attained(i, now)
            del self._held[i]
        for i, view in active.items():
            self._service[i] = self._attained(i, now)
            self._held[i] = (view.placement.num_gpus if view.placement else 0, now)
        alive = set(active) | {v.index for v in snapshot.waiting}
        self._service = {i: s for i, s in self._service.items() if i in alive}
        self._queue = {i: q for i, q in self._queue.items() if i in alive}
        self._options = {i: o for i, o in self._options.items() if i in alive}

    def _priority(self, snapshot: Snapshot, view: JobView) -> Priority:
        """Current priority of a job, updating its queue (demotion, starvation promotion)."""
        now = snapshot.now_s
        service = self._service.get(view.index, 0.0)
        waiting = view.placement is None
        if (
            self.starvation_factor is not None
            and waiting
            and service > 0
            and self._queue.get(view.index, (0, 0.0))[0] > 0
        ):
            gpus = self._launches(snapshot, view)[0].cell.num_gpus
            if now - view.waiting_since_s >= self.starvation_factor * service / gpus:
                self._service[view.index] = service = 0.0
                self._queue[view.index] = (0, now)
        queue = bisect.bisect_right(self.thresholds_gpu_s, service)
        old = self._queue.get(view.index)
        if old is None:
            self._queue[view.index] = (queue, view.job.arrival_s)
        elif old[0] != queue:
            self._queue[view.index] = (queue, now)
        q, entry = self._queue[view.index]
        return q, int(waiting), entry, view.index

    def _next_change_s_after(self, snapshot: Snapshot, views: list[JobView]) -> float:
        """Earliest time a job held now crosses a threshold or a waiting one is due promotion."""
        soonest = math.inf
        for view in views:
            i = view.index
            service = self._attained(i, snapshot.now_s)
            held = self._held.get(i)
            if held is not None and held[0] > 0:
                nxt = bisect.bisect_right(self.thresholds_gpu_s, service)
                if nxt < len(self.thresholds_gpu_s):
                    left = self.thresholds_gpu_s[nxt] - service
                    soonest = min(soonest, snapshot.now_s + left / held[0])
            elif self.starvation_factor is not None and service > 0:
                gpus = self._launches(snapshot, view)[0].cell.num_gpus
                since = view.waiting_since_s if view.placement is None else snapshot.now_s
                soonest = min(soonest, since + self.starvation_factor * service / gpus)
        return soonest

    # ------------------------------------------------------------------ decisions
    def _launches(self, snapshot: Snapshot, view: JobView) -> list[Launch]:
        """Ways to start a job on its request (cached per job; empty: reject it)."""
        options = self._options.get(view.index)
        if options is None:
            req = requested_allocation(view.job, snapshot)
            options = (
                []
                if req is None
                else launches(snapshot.tuner, view.job, req[0], req[1], self.auto_parallel)
            )
            self._options[view.index] = options
        return options

    def decide(self, snapshot: Snapshot) -> Sequence[Action]:
        """Settle service, order jobs by priority, start and preempt accordingly."""
        if (
            self._expected is not None
            and state_key(snapshot) == self._expected
            and snapshot.now_s < self._next_change_s
        ):
            return []
        self._settle(snapshot)
        actions: list[Action] = []
        views: list[JobView] = list(snapshot.active)
        for view in snapshot.waiting:
            if self._launches(snapshot, view):
                views.append(view)
            elif requested_allocation(view.job, snapshot) is None:
                actions.append(Reject(view.job.job_id, "requested GPU type absent or too small"))
            else:
                actions.append(
                    Reject(
                        view.job.job_id,
                        "no data-parallel replica fits in memory "
                        "on the requested GPUs (DP-based baseline)",
                    )
                )
        prio = {v.index: self._priority(snapshot, v) for v in views}
        order = sorted(views, key=lambda v: prio[v.index])
        alloc = snapshot.scratch()
        # Victims are taken from the back of the running list (lowest priority first).
        running = [v for v in order if v.placement is not None]
        preempted: set[int] = set()
        for view in order:
            if view.placement is not None:
                continue
            launch, victims = self._make_room(snapshot, alloc, view, running, prio, preempted)
            if launch is None:
                continue
            for victim in victims:
                actions.append(Preempt(victim.job.job_id))
                preempted.add(victim.index)
                self._service[victim.index] = self._attained(victim.index, snapshot.now_s)
                del self._held[victim.index]
            placement = alloc.place(launch.cell)
            assert placement is not None
            actions.append(Start(view.job.job_id, launch.cell, launch.constraints, launch.tuning))
            self._held[view.index] = (placement.num_gpus, snapshot.now_s)
        self._expected = state_key(snapshot, alloc)
        self._next_change_s = self._next_change_s_after(snapshot, views)
        return actions

    def _make_room(
        self,
        snapshot: Snapshot,
        alloc: Allocator,
        view: JobView,
        running: list[JobView],
        prio: dict[int, Priority],
        preempted: set[int],
    ) -> tuple[Launch | None, list[JobView]]:
        """A fitting launch for a waiting job, freeing lower-priority jobs of its type if needed.

        Returns:
            The launch (None: it cannot run now) and the jobs to preempt first; ``alloc`` has the
            victims released (not the launch placed).
        """
        if view.index in preempted:
            return None, []  # preempted in this decision: restarting it would only churn
        options = self._launches(snapshot, view)
        launch = first_fitting(alloc, options)
        if launch is not None:
            return launch, []
        gpu_type = options[0].cell.gpu_type
        freed: list[JobView] = []
        for victim in reversed(running):
            if prio[victim.index] <= prio[view.index]:
                break  # every remaining running job outranks this one
            if (
                victim.index in preempted
                or victim.placement is None
                or victim.placement.gpu_type != gpu_type
            ):
                continue
            alloc.release(victim.placement)
            freed.append(victim)
            launch = first_fitting(alloc, options)
            if launch is not None:
                break
        if launch is None:
            for victim in freed:
                assert victim.placement is not None
                alloc.take(victim.placement)
            return None, []
        # Spare the higher-priority victims whose GPUs turned out not to be needed.
        needed = [freed[-1]]
        for victim in reversed(freed[:-1]):
            assert victim.placement is not None
            free = alloc.free_per_node(gpu_type)
            if (free[list(victim.placement.nodes)] >= victim.placement.gpus_per_node).all():
                alloc.take(victim.placement)
                if first_fitting(alloc, options) is not None:
                    continue
                alloc.release(victim.placement)
            needed.append(victim)
        return first_fitting(alloc, options), needed
