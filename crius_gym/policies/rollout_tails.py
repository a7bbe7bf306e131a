"""How a truncated rollout values the rest: the tails of the lookahead's rollouts.

A rollout of :class:`~crius_gym.policies.lookahead.LookaheadPolicy` that stops at its horizon
still owes an estimate of each open job's remaining time in the system. Three estimates, from
cheapest and most optimistic to dearest and most faithful to Crius:

* :func:`remaining_tail` (``speed``): the remaining work at current speeds, a waiting job as if
  started at once on its best Cell (no queueing);
* :func:`list_schedule_tail` (``list``): waiting jobs start in queue order as the running jobs
  free GPUs (per GPU type, counts only); nobody is ever moved;
* :func:`upgrade_schedule_tail` (``upgrade``): the list schedule, and after each admission the
  GPUs still idle go to running jobs as Crius's upgrade pass gives them (grow to twice the GPUs
  on the job's type, or move to another type at the same count, best throughput gain first,
  only when the gain pays back the pause). Without it a truncated rollout thinks a job placed
  on a small Cell stays there, while Crius would grow it as GPUs free up (docs/lookahead.md).
"""

from __future__ import annotations

import bisect
import heapq
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from crius_gym.sim.records import JobRecord, JobStatus

if TYPE_CHECKING:
    from crius_gym.sim.simulator import Simulator
    from crius_gym.sim.snapshot import Snapshot
    from crius_gym.workload.job import Job


def _active_rest_s(sim: Simulator, rec: JobRecord) -> float | None:
    """A running or paused job's rest at its current speed (None: it holds no Cell)."""
    left = rec.remaining_iters
    if rec.status is JobStatus.RUNNING and rec.iter_time_s > 0:
        done = rec.progress_at(sim.now_s) - rec.progress_iters
        return max(0.0, left - done) * rec.iter_time_s
    if rec.status is JobStatus.PAUSED and rec.iter_time_s > 0:
        return max(0.0, rec.resume_at_s - sim.now_s) + left * rec.iter_time_s
    return None


@dataclass
class Tail:
    """A truncated rollout's estimate of the rest, per open job, with its totals.

    Attributes:
        rest_s: by ``id(record)``, the rest of each open job's time in the system (seconds).
        queue_s: Σ over the waiting jobs of their wait before they start (seconds).
        gpu_s: Σ over the open jobs of the GPU-seconds they will hold.
    """

    rest_s: dict[int, float]
    queue_s: float = 0.0
    gpu_s: float = 0.0

    def __call__(self, rec: JobRecord) -> float:
        """The rest of ``rec``'s time in the system (seconds)."""
        return self.rest_s[id(rec)]


def remaining_tail(sim: Simulator) -> Tail:
    """The rest of every open job at its current speed, a waiting one as if started at once.

    A waiting job runs on its best Cell from now: no queueing (a known optimism).
    """
    snap = sim.snapshot()
    records = sim.records
    out = Tail({})
    for i in (*sim.active_indices, *sim.waiting_indices):
        rec = records[i]
        rest = _active_rest_s(sim, rec)
        if rest is not None:
            out.rest_s[id(rec)] = rest
            out.gpu_s += rest * rec.num_gpus
            continue
        best = snap.candidates(rec.job).candidates
        run_s = rec.remaining_iters * best[0].iter_time_s if best else 0.0
        out.rest_s[id(rec)] = run_s
        out.gpu_s += run_s * (best[0].cell.num_gpus if best else 0)
    return out


def list_schedule_tail(sim: Simulator, cells: int) -> Tail:
    """The rest of every open job's time in the system under a list schedule (seconds).

    Running jobs keep their Cells to the end at their current speed; waiting jobs, in queue
    order, start as soon as one of their ``cells`` top-ranked Cells' GPU type has enough free
    GPUs (a later job may start before an earlier one that does not fit: backfilling), and run
    there to the end. GPUs are counted per type, not per node (fragmentation is ignored), and a
    job is never moved: a cheap, slightly pessimistic stand-in for the rollout policy's rest.
    """
    snap = sim.snapshot()
    now = sim.now_s
    records = sim.records
    free = {t: snap.free_gpus(t) for t in sim.cluster.gpu_types}
    tail = Tail({})
    out = tail.rest_s
    releases: list[tuple[float, str, int]] = []
    for i in sim.active_indices:
        rec = records[i]
        rest = _active_rest_s(sim, rec)
        out[id(rec)] = rest if rest is not None else 0.0
        tail.gpu_s += out[id(rec)] * rec.num_gpus
        cell = rec.cell
        if cell is not None and rec.num_gpus:
            heapq.heappush(releases, (now + out[id(rec)], cell.gpu_type, rec.num_gpus))
    queue: list[tuple[JobRecord, list[tuple[str, int, float]]]] = []
    for i in sim.waiting_indices:
        rec = records[i]
        ranked = snap.candidates(rec.job).candidates[:cells]
        if not ranked:
            out[id(rec)] = 0.0
            continue
        queue.append((rec, [(c.cell.gpu_type, c.cell.num_gpus, c.iter_time_s) for c in ranked]))
    t = now
    while queue:
        left: list[tuple[JobRecord, list[tuple[str, int, float]]]] = []
        for rec, options in queue:
            for gpu_type, gpus, iter_s in options:
                if free.get(gpu_type, 0) >= gpus:
                    free[gpu_type] -= gpus
                    run_s = rec.remaining_iters * iter_s
                    out[id(rec)] = t - now + run_s
                    tail.queue_s += t - now
                    tail.gpu_s += run_s * gpus
                    heapq.heappush(releases, (t + run_s, gpu_type, gpus))
                    break
            else:
                left.append((rec, options))
        queue = left
        if not queue:
            break
        if not releases:  # nothing will free a GPU: the rest starts now at its best speed
            for rec, options in queue:
                _, gpus, iter_s = options[0]
                out[id(rec)] = t - now + rec.remaining_iters * iter_s
                tail.queue_s += t - now
                tail.gpu_s += rec.remaining_iters * iter_s * gpus
            break
        t, gpu_type, gpus = heapq.heappop(releases)
        free[gpu_type] = free.get(gpu_type, 0) + gpus
        while releases and releases[0][0] <= t:
            _, gpu_type, gpus = heapq.heappop(releases)
            free[gpu_type] = free.get(gpu_type, 0) + gpus
    return tail


@dataclass
class _Open:
    """One open job of the upgrade schedule: where it runs, and from when at what speed."""

    rec: JobRecord
    gpu_type: str
    num_gpus: int
    iter_s: float
    left_iters: float  # iterations left at ``since_s``
    since_s: float  # when it (re)starts running at ``iter_s`` (after any pause)
    held_from_s: float  # when it took its GPUs (a pause holds them too)
    options: list[tuple[str, int, float]]  # the tuner's Cells: (type, GPUs, s/iteration)
    version: int = 0

    @property
    def end_s(self) -> float:
        return self.since_s + self.left_iters * self.iter_s

    def left_at(self, t: float) -> float:
        """Iterations left at time ``t`` (none done during a pause)."""
        return max(0.0, self.left_iters - max(0.0, t - self.since_s) / self.iter_s)


# An upgrade offer: (minus the throughput gain in samples/s, job, the job's version when
# offered, target type, GPUs needed on it, the target's GPUs, its s/iteration).
_Offer = tuple[float, int, int, str, int, int, float]


class _Upgrades:
    """Upgrade offers per target GPU type, best gain first; stale offers drop out lazily."""

    def __init__(self) -> None:
        self.by_type: dict[str, list[_Offer]] = {}

    def offer(self, k: int, job: _Open, cells: TailCells) -> None:
        """List ``job``'s upgrades from where it runs now (Crius's grow and type change)."""
        batch = job.rec.job.global_batch
        for gpu_type, need, gpus, iter_s in cells.moves(job.rec.job, job.gpu_type, job.num_gpus):
            gain = batch / iter_s - batch / job.iter_s
            if gain > 0:
                offer = (-gain, k, job.version, gpu_type, need, gpus, iter_s)
                bisect.insort(self.by_type.setdefault(gpu_type, []), offer)

    def best(
        self,
        jobs: list[_Open],
        free: dict[str, int],
        t: float,
        pause_s: _Pauses,
        frozen: set[int],
    ) -> _Offer | None:
        """The largest-gain offer that fits the idle GPUs now and pays back its pause.

        Jobs in ``frozen`` (started or changed at this instant) are passed over: Crius changes
        a job at most once per decision.
        """
        found: _Offer | None = None
        for gpu_type, offers in self.by_type.items():
            idle = free.get(gpu_type, 0)
            if idle <= 0:
                continue
            stale = []
            for pos, offer in enumerate(offers):
                if found is not None and offer[0] >= found[0]:
                    break  # sorted by gain: nothing further on this type beats the best found
                _, k, version, _, need, gpus, iter_s = offer
                job = jobs[k]
                if job.version != version:
                    stale.append(pos)
                    continue
                if need > idle or k in frozen:
                    continue
                if job.left_at(t) * (job.iter_s - iter_s) > pause_s(gpus):
                    found = offer
                    break
            for pos in reversed(stale):
                del offers[pos]
        return found


class TailCells:
    """The tuner's Cells of each (model, batch) as the upgrade schedule reads them, cached.

    One per run of a lookahead (the tuner's results are fixed for a cluster): building these
    lists on every truncated rollout was most of the upgrade schedule's cost.
    """

    def __init__(self, snap: Snapshot) -> None:
        self._snap = snap
        self._ranked: dict[tuple[object, int], list[tuple[str, int, float]]] = {}
        self._moves: dict[tuple[object, int, str, int], list[tuple[str, int, int, float]]] = {}

    def ranked(self, job: Job) -> list[tuple[str, int, float]]:
        """The job's Cells, best first: (GPU type, GPUs, seconds per iteration)."""
        key = (job.model, job.global_batch)
        hit = self._ranked.get(key)
        if hit is None:
            hit = self._ranked[key] = [
                (c.cell.gpu_type, c.cell.num_gpus, c.iter_time_s)
                for c in self._snap.candidates(job).candidates
            ]
        return hit

    def moves(self, job: Job, own: str, n: int) -> list[tuple[str, int, int, float]]:
        """The job's best upgrade per target type from n GPUs of ``own``.

        Returns (type, idle GPUs it needs, GPUs, seconds per iteration): a grow on ``own`` to at
        most 2n, another type at no more than n (the tuner lists non-dominated Cells: a
        smaller one may be the best there).
        """
        key = (job.model, job.global_batch, own, n)
        hit = self._moves.get(key)
        if hit is None:
            best: dict[str, tuple[float, int]] = {}
            for gpu_type, gpus, iter_s in self.ranked(job):
                if (gpu_type == own and not n < gpus <= 2 * n) or (gpu_type != own and gpus > n):
                    continue
                if iter_s < best.get(gpu_type, (math.inf, 0))[0]:
                    best[gpu_type] = (iter_s, gpus)
            hit = self._moves[key] = [
                (gpu_type, gpus - n if gpu_type == own else gpus, gpus, iter_s)
                for gpu_type, (iter_s, gpus) in best.items()
            ]
        return hit


class _Pauses:
    """The pause of a reconfiguration onto n GPUs (tuning plus restore), as Crius charges it."""

    def __init__(self, snap: Snapshot) -> None:
        self._snap = snap
        self._cache: dict[int, float] = {}

    def __call__(self, num_gpus: int) -> float:
        hit = self._cache.get(num_gpus)
        if hit is None:
            snap = self._snap
            hit = self._cache[num_gpus] = (
                snap.tuning_overhead_s(num_gpus, "pruned") + snap.restore_s
            )
        return hit


def upgrade_schedule_tail(
    sim: Simulator, cells: int, max_moves: int = 10, cache: TailCells | None = None
) -> Tail:
    """The rest of every open job under a list schedule with Crius's upgrades (seconds).

    As :func:`list_schedule_tail` (per GPU type, counts only; waiting jobs in queue order on
    their ``cells`` top-ranked Cells, with backfilling), and at every event, after the
    admissions, up to ``max_moves`` upgrades of running jobs onto the idle GPUs, largest
    throughput gain first, as Crius's upgrade pass makes them: a job of n GPUs grows to at
    most 2n on its type, or moves to another type at no more than n, when the time it saves at
    its current progress pays back the pause (tuning plus restore); a job changes at most once
    per event, and not at the event it starts. Jobs are never shrunk, and fragmentation is
    ignored. ``cache`` keeps the Cells of the jobs' models across calls (a run's
    :class:`TailCells`; default: a new one).
    """
    snap = sim.snapshot()
    now = sim.now_s
    records = sim.records
    free = {t: snap.free_gpus(t) for t in sim.cluster.gpu_types}
    pauses = _Pauses(snap)
    table = cache if cache is not None else TailCells(snap)
    jobs: list[_Open] = []
    upgrades = _Upgrades()
    events: list[tuple[float, int, int]] = []  # (end, job, version)
    tail = Tail({})

    def launch(job: _Open) -> None:
        jobs.append(job)
        heapq.heappush(events, (job.end_s, len(jobs) - 1, job.version))
        upgrades.offer(len(jobs) - 1, job, table)

    for i in sim.active_indices:
        rec = records[i]
        rest = _active_rest_s(sim, rec)
        cell = rec.cell
        if rest is None or cell is None or not rec.num_gpus:
            tail.rest_s[id(rec)] = rest or 0.0
            continue
        since = max(now, rec.resume_at_s) if rec.status is JobStatus.PAUSED else now
        left = (now + rest - since) / rec.iter_time_s
        launch(
            _Open(
                rec,
                cell.gpu_type,
                rec.num_gpus,
                rec.iter_time_s,
                left,
                since,
                now,
                table.ranked(rec.job),
            )
        )
    queue = []
    for i in sim.waiting_indices:
        rec = records[i]
        options = table.ranked(rec.job)
        if options:
            queue.append((rec, options))
        else:
            tail.rest_s[id(rec)] = 0.0

    t = now
    frozen: set[int] = set()  # jobs started or changed at this instant
    while True:
        frozen.clear()
        # Admissions first, in queue order with backfilling (as the list schedule) ...
        waiting = []
        for rec, options in queue:
            for gpu_type, gpus, iter_s in options[:cells]:
                if free.get(gpu_type, 0) >= gpus:
                    free[gpu_type] -= gpus
                    tail.queue_s += t - now
                    frozen.add(len(jobs))
                    launch(_Open(rec, gpu_type, gpus, iter_s, rec.remaining_iters, t, t, options))
                    break
            else:
                waiting.append((rec, options))
        queue = waiting
        # ... then Crius's upgrades onto the GPUs still idle.
        for _ in range(max_moves):
            offer = upgrades.best(jobs, free, t, pauses, frozen)
            if offer is None:
                break
            _, k, _, gpu_type, need, gpus, iter_s = offer
            job = jobs[k]
            tail.gpu_s += (t - job.held_from_s) * job.num_gpus
            if gpu_type != job.gpu_type:
                free[job.gpu_type] += job.num_gpus
            free[gpu_type] -= need
            job.left_iters = job.left_at(t)
            job.gpu_type, job.num_gpus, job.iter_s = gpu_type, gpus, iter_s
            job.since_s, job.held_from_s = t + pauses(gpus), t
            job.version += 1
            heapq.heappush(events, (job.end_s, k, job.version))
            upgrades.offer(k, job, table)
            frozen.add(k)
        while events and jobs[events[0][1]].version != events[0][2]:
            heapq.heappop(events)
        if not events:
            # Nothing will free a GPU: the rest starts now at its best speed.
            for rec, options in queue:
                _, gpus, iter_s = options[0]
                run_s = rec.remaining_iters * iter_s
                tail.rest_s[id(rec)] = t - now + run_s
                tail.queue_s += t - now
                tail.gpu_s += run_s * gpus
            return tail
        t = events[0][0]
        while events and events[0][0] <= t:
            _, k, version = heapq.heappop(events)
            job = jobs[k]
            if job.version != version:
                continue
            free[job.gpu_type] += job.num_gpus
            tail.rest_s[id(job.rec)] = t - now
            tail.gpu_s += (t - job.held_from_s) * job.num_gpus
            job.version += 1  # finished: its offers go stale
