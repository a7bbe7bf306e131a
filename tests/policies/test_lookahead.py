"""The lookahead scheduler: blind to the future, exact when untruncated, better than its base."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from crius_gym.policies.lookahead import LookaheadOptions, LookaheadPolicy
from crius_gym.policies.registry import make_policy
from crius_gym.sim.events import EventKind
from crius_gym.sim.policy import PolicyContext
from crius_gym.sim.records import JobStatus
from crius_gym.sim.simulator import Simulator
from crius_gym.sim.truth import EstimatorTruth
from crius_gym.workload.job import Trace


class Recorder:
    """Wraps a policy and records each decision's time and actions."""

    def __init__(self, policy):
        self.policy = policy
        self.name = policy.name
        self.tick_interval_s = policy.tick_interval_s
        self.log = []

    def reset(self, context):
        self.policy.reset(context)

    def decide(self, snapshot):
        actions = list(self.policy.decide(snapshot))
        self.log.append((snapshot.now_s, tuple(actions)))
        return actions


def test_decisions_do_not_depend_on_future_arrivals(hetero):
    sc, trace = hetero
    cut = 25
    t_cut = trace.jobs[cut].arrival_s
    # Same first 25 jobs; afterwards other jobs (the later jobs of another trace, shifted).
    other = sc.synthetic_trace("test", 3)
    later = [
        dataclasses.replace(j, job_id=f"x{k}", arrival_s=t_cut + j.arrival_s)
        for k, j in enumerate(other.jobs[:20])
    ]
    changed = Trace("changed-future", (*trace.jobs[:cut], *later))
    logs = []
    for tr in (trace, changed):
        rec = Recorder(make_policy("crius-lookahead", running_jobs=2))
        sc.make_simulator().run(tr, rec)
        logs.append([entry for entry in rec.log if entry[0] < t_cut])
    assert len(logs[0]) > 10
    assert logs[0] == logs[1]


def test_a_horizon_covering_the_episode_equals_the_full_rollout(hetero):
    sc, trace = hetero
    runs = []
    for horizon in (None, 10**9):
        policy = make_policy("crius-lookahead", running_jobs=2, horizon_events=horizon)
        result = sc.make_simulator().run(trace, policy)
        assert policy.stats.truncated == 0
        runs.append([(j.job_id, j.finish_s) for j in result.jobs])
    assert runs[0] == runs[1]


@pytest.mark.parametrize("tail", ["list", "speed", "upgrade"])
def test_truncated_rollouts_are_counted_and_still_finish(hetero, tail):
    sc, trace = hetero
    policy = make_policy("crius-lookahead", horizon_events=3, tail=tail)
    result = sc.make_simulator().run(trace, policy)
    assert policy.stats.truncated > 0
    assert result.summary.finished == len(trace.jobs)


def test_beats_its_base_on_a_known_trace(hetero):
    sc, trace = hetero
    crius = sc.make_simulator().run(trace, make_policy("crius"))
    policy = make_policy("crius-lookahead", running_jobs=4)
    look = sc.make_simulator().run(trace, policy)
    assert look.summary.finished == crius.summary.finished == len(trace.jobs)
    assert look.summary.avg_jct_s < 0.97 * crius.summary.avg_jct_s
    assert policy.stats.changed > 0


def test_with_no_alternatives_it_is_its_base(hetero):
    sc, trace = hetero
    crius = sc.make_simulator().run(trace, make_policy("crius"))
    # Only the base's proposal and waiting: it may still wait where Crius acts, so compare
    # with a margin that no rollout difference reaches.
    policy = LookaheadPolicy(
        LookaheadOptions(head_jobs=0, cells_per_job=1, running_jobs=0, margin=0.999999)
    )
    same = sc.make_simulator().run(trace, policy)
    assert [j.finish_s for j in same.jobs] == [j.finish_s for j in crius.jobs]


class SlowTruth:
    """Ground truth 1.3x slower than the estimator (a cluster the estimator flatters)."""

    def __init__(self, tuner):
        self.inner = EstimatorTruth(tuner)

    def iter_time_s(self, job, cell, constraints=None):
        t = self.inner.iter_time_s(job, cell, constraints)
        return None if t is None else 1.3 * t


def test_fork_sees_only_the_present_and_prices_by_the_estimator(hetero):
    sc, trace = hetero
    base = sc.make_simulator()
    sim = Simulator(base.cluster, base.tuner, SlowTruth(base.tuner), base.config)
    policy = make_policy("crius")
    sim.reset(trace, None, None)
    policy.reset(PolicyContext(sim.cluster, sim.tuner, np.random.default_rng(0)))
    for _ in range(15):
        assert sim.advance()
        if actions := policy.decide(sim.snapshot()):
            sim.apply(actions)
    assert sim.future_arrivals > 0
    fork = sim.snapshot().fork()
    arrived = len(trace.jobs) - sim.future_arrivals
    assert len(fork.records) == arrived and fork.future_arrivals == 0
    assert all(e.kind is not EventKind.ARRIVAL for e in fork._queue._heap)
    running = [r for r in fork.records if r.status is JobStatus.RUNNING]
    assert running and all(r.iter_time_s == r.estimated_iter_time_s for r in running)
    # The run itself is untouched: it still prices by its ground truth.
    assert all(
        r.iter_time_s == pytest.approx(1.3 * r.estimated_iter_time_s)
        for r in sim.records
        if r.status is JobStatus.RUNNING
    )
    # The fork runs to the end of the present jobs only.
    while fork.advance():
        if actions := policy.decide(fork.snapshot()):
            fork.apply(actions)
    assert all(r.status is JobStatus.FINISHED for r in fork.records)


def test_bad_options_are_refused():
    from crius_gym.errors import ConfigError

    for bad in (
        {"horizon_events": 0},
        {"margin": 1.0},
        {"cells_per_job": 0},
        {"horizon_s": -1},
        {"queue_weight": -1.0},
        {"capacity_price": float("nan")},
        {"tail": "crius"},
        {"screen_s": 0.0},
        {"screen_s": 1800.0, "horizon_s": 900.0},
        {"screen_keep": 0},
    ):
        with pytest.raises(ConfigError):
            LookaheadOptions(**bad)


def _fork(sim):
    """The present-only fork of ``sim`` and the trace indices of its jobs."""
    work = sim.snapshot().fork()
    return work, [*work.waiting_indices, *work.active_indices]


def _queued_s(sim):
    return sum(
        r.queueing_s + (sim.now_s - r.last_update_s if r.status is JobStatus.WAITING else 0.0)
        for r in sim.records
    )


@pytest.mark.parametrize("horizon_s", [None, 1800.0])
def test_prices_add_the_waiting_and_gpu_seconds_of_the_rollout(crowded, horizon_s):
    sim, crius = crowded
    work, present = _fork(sim)
    costs = {}
    for prices in ((0.0, 0.0), (2.0, 0.0), (0.0, 3.0)):
        look = LookaheadPolicy(
            LookaheadOptions(queue_weight=prices[0], capacity_price=prices[1], horizon_s=horizon_s)
        )
        costs[prices] = look._rollout(work, crius, None, present).cost
    if horizon_s is None:
        # Untruncated: exactly the job-seconds the present jobs wait under Crius, and the
        # GPU-seconds they hold, at their prices.
        check = work.clone()
        before = _queued_s(check)
        policy = LookaheadPolicy()._copy(crius, check)
        held_s = 0.0
        while True:
            t0, busy = check.now_s, check.allocator.busy_gpus()
            if not check.advance():
                break
            held_s += busy * (check.now_s - t0)
            if actions := policy.decide(check.snapshot()):
                check.apply(actions)
        waited = _queued_s(check) - before
        assert waited > 0 and held_s > 0
        assert costs[2.0, 0.0] - costs[0.0, 0.0] == pytest.approx(2.0 * waited)
        price = 3.0 * len(present) / sim.cluster.num_gpus
        assert costs[0.0, 3.0] - costs[0.0, 0.0] == pytest.approx(price * held_s)
    else:
        assert costs[2.0, 0.0] > costs[0.0, 0.0] and costs[0.0, 3.0] > costs[0.0, 0.0]


def test_without_wait_when_queued_waiting_is_no_candidate_while_jobs_wait(crowded):
    sim, crius = crowded
    snap = sim.snapshot()
    proposal = next(iter(LookaheadPolicy()._copy(crius, sim).decide(snap)), None)
    assert proposal is not None and snap.waiting
    looks = [LookaheadPolicy(LookaheadOptions(wait_when_queued=w)) for w in (True, False)]
    with_wait, without = (look._candidates(snap, proposal) for look in looks)
    assert None in with_wait
    assert [c for c in with_wait if c is not None] == without
    # With no proposal, waiting stays the way to let time run.
    assert None in looks[1]._candidates(snap, None) or not snap.active


@pytest.mark.parametrize("truncation", [{"horizon_s": 600.0}, {"horizon_events": 2}])
def test_a_full_rollout_ignores_every_truncation(crowded, truncation):
    # The audit of truncated rollouts compares them with full ones: a full rollout must not
    # stop at either horizon.
    sim, crius = crowded
    work, present = _fork(sim)
    untruncated = LookaheadPolicy()._rollout(work, crius, None, present)
    look = LookaheadPolicy(LookaheadOptions(**truncation))
    truncated = look._rollout(work, crius, None, present)
    full = look._rollout(work, crius, None, present, full=True)
    assert truncated.truncated and not full.truncated and not untruncated.truncated
    assert full.cost == untruncated.cost != truncated.cost


def _candidates(crowded, look):
    sim, crius = crowded
    snap = sim.snapshot()
    proposal = next(iter(look._copy(crius, sim).decide(snap)), None)
    return look._candidates(snap, proposal)


@pytest.mark.parametrize("horizon_s", [None, 3600.0])
def test_a_rollout_stopped_at_the_screen_and_run_on_is_the_rollout_run_at_once(crowded, horizon_s):
    # The policy must see the event the rollout stopped at before time moves on, and the
    # screen's tail must leave the simulator as it was.
    sim, crius = crowded
    work, present = _fork(sim)
    opts = LookaheadOptions(horizon_s=horizon_s, running_jobs=2)
    plain = LookaheadPolicy(opts)
    candidates = _candidates(crowded, plain)
    assert len(candidates) >= 4
    # All but one of the others go on past the screen.
    screen = dataclasses.replace(opts, screen_s=300.0, screen_keep=len(candidates) - 2)
    screened = LookaheadPolicy(screen)
    want = plain._costs(work, crius, candidates, present)
    got = screened._costs(work, crius, candidates, present)
    assert [g for g in got if g != math.inf] == [
        w for w, g in zip(want, got, strict=True) if g != math.inf
    ]
    assert screened.stats.screened == got.count(math.inf) <= 1
    assert screened.stats.rollouts == len(candidates)
    assert screened.stats.truncated > plain.stats.truncated  # the screen stopped rollouts


def test_a_screen_keeps_the_first_candidate_and_the_cheapest_others(crowded):
    sim, crius = crowded
    work, present = _fork(sim)
    opts = LookaheadOptions(horizon_s=3600.0, running_jobs=2, screen_s=600.0, screen_keep=1)
    look = LookaheadPolicy(opts)
    candidates = _candidates(crowded, look)
    at_screen = LookaheadPolicy(dataclasses.replace(opts, horizon_s=600.0, screen_s=None))
    first = [at_screen._rollout(work, crius, c, present) for c in candidates]
    full = LookaheadPolicy(dataclasses.replace(opts, screen_s=None))
    want = full._costs(work, crius, candidates, present)
    got = look._costs(work, crius, candidates, present)
    kept = min(range(1, len(candidates)), key=lambda k: (first[k].cost, k))
    for k, c in enumerate(got):
        if k in (0, kept) or not first[k].truncated:
            assert c == want[k], k
        else:
            assert c == math.inf, k
    assert (
        look.stats.screened
        == sum(1 for k, r in enumerate(first) if r.truncated and k not in (0, kept))
        >= 1
    )
