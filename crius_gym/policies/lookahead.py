"""Crius with online lookahead: candidate actions judged by rollouts over the jobs present.

At each decision the scheduler asks its rollout policy (Crius by default) what it would do next,
and judges that action against a few others — waiting, the same job on its other top Cells, a
job further down the queue on its best Cell — by rolling each out on a fork of the simulator
that holds only the jobs already arrived and prices them by the estimator
(:meth:`Snapshot.fork`): the action, then the rollout policy deciding everything after it.
It takes the cheapest (the rollout policy's own action unless another is cheaper by more than
``margin``), applies it to its working copy and asks again, until it decides to wait.

The cost of a rollout is Σ over the jobs present of their time in the system (finish −
arrival). A rollout stops at the end of the present jobs, or, when truncated, after
``horizon_events`` decisions or ``horizon_s`` simulated seconds; the rest is valued by ``tail``:
``speed``, the remaining work at current speeds (a waiting job as if it started at once on its
best Cell: no queueing), ``list``, a list schedule of the waiting jobs on the GPUs as the
running jobs free them (per GPU type, counts only), so queueing is priced, or ``upgrade``
(default), that list schedule with Crius's upgrades of running jobs onto the GPUs left idle.
With ``screen_s`` every candidate's rollout stops first at that shorter horizon and only the
cheapest few go on (successive halving).

Because the future is never read, the decision is a function of the state: what a learned policy
can be trained to imitate. On a scenario with measured ground truth the rollouts still use the
estimator (the scheduler's view), so what the lookahead gains there is not flattered by it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from crius_gym.policies.lookahead_options import LookaheadOptions
from crius_gym.policies.registry import make_policy, register
from crius_gym.policies.rollout_tails import (
    Tail,
    TailCells,
    list_schedule_tail,
    remaining_tail,
    upgrade_schedule_tail,
)
from crius_gym.sim.actions import Action, InvalidActionError, Reconfigure, Reject, Start
from crius_gym.sim.policy import Policy, PolicyContext
from crius_gym.sim.records import JobStatus
from crius_gym.sim.snapshot import Snapshot

if TYPE_CHECKING:  # the registry imports every policy module: --help stays light
    from crius_gym.sim.simulator import Simulator


@dataclass
class LookaheadStats:
    """What the lookahead did over a run (for reports and benchmarks).

    Attributes:
        instants: decisions asked of it.
        choices: actions chosen by comparing candidates.
        changed: of those, where it did not take the base's action.
        rollouts: rollouts run.
        truncated: rollouts stopped at a horizon (the screen's included).
        screened: rollouts left at the screen (``screen_s``).
    """

    instants: int = 0
    choices: int = 0
    changed: int = 0
    rollouts: int = 0
    truncated: int = 0
    screened: int = 0


@dataclass
class _Rollout:
    cost: float
    truncated: bool = False


@dataclass
class _Branch:
    """A rollout under way: its simulator and policy copies, and what it has counted so far."""

    sim: Simulator
    policy: Policy
    start_s: float
    events: int = 0
    queue_s: float = 0.0
    gpu_s: float = 0.0
    undecided: bool = False  # stopped right after an event the policy has not yet seen


class LookaheadPolicy:
    """A scheduler that judges its rollout policy's next action against others by rollouts.

    Args:
        options: settings (default: Crius as rollout policy, rollouts to the end).
        name: registry name used in reports.
        base: a rollout policy object to use instead of ``options.base`` (e.g. a distilled
            network policy); it is copied for every rollout, so it must be deep-copyable.
    """

    def __init__(
        self,
        options: LookaheadOptions | None = None,
        name: str = "crius-lookahead",
        base: Policy | None = None,
    ) -> None:
        self.options = options or LookaheadOptions()
        self.name = name
        self._given_base = base
        self.base: Policy = base if base is not None else make_policy(self.options.base)
        self.tick_interval_s = self.base.tick_interval_s
        self.stats = LookaheadStats()
        self._context: PolicyContext | None = None
        self._cells: TailCells | None = None

    def reset(self, context: PolicyContext) -> None:
        """Start a new run: a fresh rollout policy, fresh counters."""
        if self._given_base is None:
            self.base = make_policy(self.options.base)
        self.base.reset(context)
        self._context = context
        self.stats = LookaheadStats()
        self._cells = None

    # ------------------------------------------------------------------ copies
    def _copy(self, policy: Policy, sim: Simulator) -> Policy:
        """A copy of a policy's bookkeeping; the cluster, tuner and speed caches are shared."""
        shared: dict[int, object] = {id(sim.tuner): sim.tuner, id(sim.cluster): sim.cluster}
        for cache in ("_speeds", "_tables"):
            obj = getattr(policy, cache, None)
            if obj is not None:
                shared[id(obj)] = obj
        return copy.deepcopy(policy, shared)

    # ------------------------------------------------------------------ deciding
    def decide(self, snapshot: Snapshot) -> list[Action]:
        """The actions for this instant, each the cheapest of its candidates by rollout."""
        self.stats.instants += 1
        opts = self.options
        work = snapshot.fork(opts.estimated)
        present = [*snapshot.waiting.indices, *(v.index for v in snapshot.active)]
        base = self._copy(self.base, work)
        chosen: list[Action] = []
        plan: list[Action] | None = None  # the base's plan at this instant, while followed
        for _ in range(opts.max_steps):
            if plan is None:
                base_after = self._copy(base, work)
                plan = self._plan(base_after, work)
                rejects = [a for a in plan if isinstance(a, Reject)]
                if rejects:  # a job the base can never run: not a choice
                    work.apply(rejects)
                    chosen.extend(rejects)
                    plan = [a for a in plan if not isinstance(a, Reject)]
            proposal = plan[0] if plan else None
            candidates = self._candidates(work.snapshot(), proposal)
            if not candidates:
                break
            if len(candidates) == 1:
                pick = candidates[0]
            else:
                costs = self._costs(work, base, candidates, present)
                pick = self._pick(candidates, costs, proposal)
                self.stats.choices += 1
                self.stats.changed += int(pick != proposal)
            if pick is None:
                break
            work.apply([pick])
            chosen.append(pick)
            if pick == proposal:
                # Followed: the rest of the plan stands (as an env's guide keeps it), and the
                # base's bookkeeping is the one that made it.
                base = base_after
                plan = plan[1:]
            else:
                plan = None  # the base re-plans on the new state
        else:
            # Past max_steps: the rest of the base's plan at this instant, as it stands.
            if plan is None:
                base_after = self._copy(base, work)
                plan = self._plan(base_after, work)
            chosen.extend(plan)
            base = base_after
        self.base = base
        return chosen

    def _plan(self, base: Policy, work: Simulator) -> list[Action]:
        """The base's plan for the rest of this instant (a hook for callers that hold it)."""
        return list(base.decide(work.snapshot()))

    def _costs(
        self,
        work: Simulator,
        base: Policy,
        candidates: Sequence[Action | None],
        present: Sequence[int],
    ) -> list[float]:
        """Each candidate's rollout cost (job-seconds); a hook for audits of truncation.

        With ``screen_s`` (successive halving) every rollout first stops at the screen; the
        first candidate and the ``screen_keep`` cheapest others go on to the horizon, and the
        rest cost infinity unless their rollout already ended.
        """
        opts = self.options
        if opts.screen_s is None or len(candidates) <= opts.screen_keep + 1:
            return [self._rollout(work, base, c, present).cost for c in candidates]
        branches = [self._branch(work, base, c) for c in candidates]
        first = [
            b
            if isinstance(b, _Rollout)
            else self._run(b, present, opts.horizon_events, opts.screen_s)
            for b in branches
        ]
        others = sorted(range(1, len(candidates)), key=lambda k: (first[k].cost, k))
        going_on = {0, *others[: opts.screen_keep]}
        costs: list[float] = []
        for k, (b, r) in enumerate(zip(branches, first, strict=True)):
            if not r.truncated:
                costs.append(r.cost)
            elif k in going_on:
                assert isinstance(b, _Branch)
                costs.append(self._run(b, present, opts.horizon_events, opts.horizon_s).cost)
            else:
                self.stats.screened += 1
                costs.append(math.inf)
        return costs

    def _pick(
        self, candidates: Sequence[Action | None], costs: Sequence[float], proposal: Action | None
    ) -> Action | None:
        """The cheapest candidate; the base's proposal unless beaten by more than the margin."""
        best = min(range(len(candidates)), key=lambda k: (costs[k], k))
        if proposal is None or candidates[best] == proposal:
            return candidates[best]
        own = costs[candidates.index(proposal)]
        if math.isfinite(own) and costs[best] >= own * (1.0 - self.options.margin):
            return proposal
        return candidates[best]

    def _candidates(self, snap: Snapshot, proposal: Action | None) -> list[Action | None]:
        """The base's proposal first, then waiting, then other Cells and other jobs."""
        opts = self.options
        out: list[Action | None] = []
        if proposal is not None:
            out.append(proposal)
        running = bool(snap.active)
        if (proposal is not None or running) and (
            opts.wait_when_queued or proposal is None or not snap.waiting
        ):
            out.append(None)  # wait: let time run to the next event
        own = proposal.job_id if isinstance(proposal, Start) else None
        if isinstance(proposal, Start):
            view = next(v for v in snap.waiting if v.job.job_id == own)
            out.extend(self._starts(snap, view, opts.cells_per_job, exclude=proposal))
        others = 0
        for view in snap.waiting:
            if others >= opts.head_jobs:
                break
            if view.job.job_id == own:
                continue
            others += 1
            out.extend(self._starts(snap, view, opts.other_cells))
        moved = 0
        for view in snap.active if snap.waiting or opts.moves_when_idle else ():
            if moved >= opts.running_jobs:
                break
            if view.status is not JobStatus.RUNNING or view.job.job_id == getattr(
                proposal, "job_id", None
            ):
                continue
            moved += 1
            out.extend(self._moves(snap, view, opts.cells_per_job))
        return out

    @staticmethod
    def _moves(snap: Snapshot, view: Any, limit: int) -> list[Action | None]:
        """Moves of a running job to its top-ranked other Cells that fit once its GPUs are free."""
        found: list[Action | None] = []
        alloc = snap.scratch()
        alloc.release(view.placement)
        for cand in snap.candidates(view.job).candidates:
            if len(found) >= limit:
                break
            if cand.cell == view.cell or not alloc.can_place(cand.cell):
                continue
            found.append(Reconfigure(view.job.job_id, cand.cell))
        return found

    @staticmethod
    def _starts(
        snap: Snapshot, view: Any, limit: int, exclude: Action | None = None
    ) -> list[Action | None]:
        """Starts of a waiting job on its top-ranked Cells that fit now."""
        found: list[Action | None] = []
        for cand in snap.candidates(view.job).candidates:
            if len(found) >= limit:
                break
            action = Start(view.job.job_id, cand.cell)
            if action == exclude or not snap.fits(cand.cell):
                continue
            found.append(action)
        return found

    # ------------------------------------------------------------------ rollouts
    def _rollout(
        self,
        work: Simulator,
        base: Policy,
        action: Action | None,
        present: Sequence[int],
        full: bool = False,
    ) -> _Rollout:
        """What ``action`` now, then the base policy, costs the present jobs (job-seconds).

        ``full`` ignores the options' truncation (``horizon_events`` and ``horizon_s``): the
        rollout runs to the end of the present jobs (audits of the truncation's bias).
        """
        branch = self._branch(work, base, action)
        if isinstance(branch, _Rollout):
            return branch
        opts = self.options
        if full:
            return self._run(branch, present, None, None)
        return self._run(branch, present, opts.horizon_events, opts.horizon_s)

    def _branch(self, work: Simulator, base: Policy, action: Action | None) -> _Branch | _Rollout:
        """A rollout's start: ``action`` applied on a copy, then the base's reply to it."""
        self.stats.rollouts += 1
        sim = work.clone()
        policy = self._copy(base, sim)
        try:
            if action is not None:
                sim.apply([action])
                acts = policy.decide(sim.snapshot())
                if acts:
                    sim.apply(acts)
        except InvalidActionError:
            return _Rollout(math.inf)
        return _Branch(sim, policy, sim.now_s)

    def _run(
        self,
        b: _Branch,
        present: Sequence[int],
        horizon_events: int | None,
        horizon_s: float | None,
    ) -> _Rollout:
        """Run a branch on to a horizon (None: the end) and value it; it can go on later."""
        opts = self.options
        sim, policy = b.sim, b.policy
        # Job-seconds spent waiting and GPU-seconds held in the rollout, for the extra costs
        # (counted only when priced: this loop is the lookahead's hot path).
        priced = bool(opts.queue_weight or opts.capacity_price)
        waiting = busy = 0
        while True:
            if b.undecided:  # stopped at a horizon right after an event: decide it first
                b.undecided = False
                acts = policy.decide(sim.snapshot())
                if acts:
                    sim.apply(acts)
            # With drain_queue the horizon is a minimum: the rollout goes on while jobs wait.
            hold = opts.drain_queue and bool(sim.waiting_indices)
            if horizon_events is not None and b.events >= horizon_events and not hold:
                break
            before_s = sim.now_s
            if priced:
                waiting, busy = len(sim.waiting_indices), sim.allocator.busy_gpus()
            if not sim.advance():
                if sim.jobs_in_system:  # nothing more will happen, yet jobs are left: a stall
                    return _Rollout(math.inf)
                return _Rollout(
                    self._charged(sim, rollout_cost_s(sim, present), b.queue_s, b.gpu_s, present)
                )
            b.queue_s += waiting * (sim.now_s - before_s)
            b.gpu_s += busy * (sim.now_s - before_s)
            b.events += 1
            b.undecided = True
            if (
                horizon_s is not None
                and sim.now_s - b.start_s > horizon_s
                and not (opts.drain_queue and sim.waiting_indices)
            ):
                break
        self.stats.truncated += 1
        tail = (
            remaining_tail(sim)
            if opts.tail == "speed"
            else upgrade_schedule_tail(sim, opts.tail_cells, cache=self._tail_cells(sim))
            if opts.tail == "upgrade"
            else list_schedule_tail(sim, opts.tail_cells)
        )
        cost = rollout_cost_s(sim, present, tail)
        return _Rollout(
            self._charged(sim, cost, b.queue_s + tail.queue_s, b.gpu_s + tail.gpu_s, present),
            truncated=True,
        )

    def _tail_cells(self, sim: Simulator) -> TailCells:
        """The run's cache of the jobs' Cells for the upgrade tail (made on first use)."""
        if self._cells is None:
            self._cells = TailCells(sim.snapshot())
        return self._cells

    def _charged(
        self, sim: Simulator, cost_s: float, queue_s: float, gpu_s: float, present: Sequence[int]
    ) -> float:
        """A rollout's cost with the prices of waiting and of GPU time (options)."""
        opts = self.options
        price = opts.capacity_price * len(present) / sim.cluster.num_gpus
        return cost_s + opts.queue_weight * queue_s + price * gpu_s


def rollout_cost_s(sim: Simulator, indices: Sequence[int], tail: Any = None) -> float:
    """Σ over jobs ``indices`` of their time in the system as of now (job-seconds).

    A finished job counts finish − arrival; any other counts now − arrival plus ``tail(record)``
    (a truncated rollout's estimate of the rest; nothing when the rollout ran to the end).
    """
    records = sim.records
    total = 0.0
    for i in indices:
        r = records[i]
        if r.status is JobStatus.FINISHED and r.finish_s is not None:
            total += r.finish_s - r.job.arrival_s
        elif r.status is not JobStatus.REJECTED:
            total += sim.now_s - r.job.arrival_s + (tail(r) if tail is not None else 0.0)
    return total


def _factory(name: str, **preset: Any) -> Any:
    def make(**overrides: Any) -> LookaheadPolicy:
        return LookaheadPolicy(LookaheadOptions(**{**preset, **overrides}), name=name)

    make.__doc__ = f"Build the ``{name}`` policy (keyword arguments override LookaheadOptions)."
    return make


register("crius-lookahead", opt_in=True)(_factory("crius-lookahead"))

__all__ = [
    "LookaheadOptions",
    "LookaheadPolicy",
    "LookaheadStats",
    "Tail",
    "list_schedule_tail",
    "remaining_tail",
    "rollout_cost_s",
    "upgrade_schedule_tail",
]
