"""Simulator.clone, state and restore_state: independent copies that continue exactly.

The copies are built by hand (records shallowly, the allocator and queue by their own copy);
these tests hold them to what a generic deep copy gives and to the uninterrupted run.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from crius_gym.policies.registry import make_policy
from crius_gym.scenarios import load_scenario
from crius_gym.sim.policy import PolicyContext


@pytest.fixture(scope="module")
def setting():
    sc = load_scenario("hetero-64")
    trace = sc.synthetic_trace("test", 2)
    return sc, trace, sc.make_simulator().run(trace, make_policy("crius"))


def _started(sc, trace, name="crius"):
    sim = sc.make_simulator()
    policy = make_policy(name)
    sim.reset(trace, None, policy.tick_interval_s)
    policy.reset(PolicyContext(sim.cluster, sim.tuner, np.random.default_rng(0)))
    return sim, policy


def _finish(sim, policy):
    while sim.advance():
        sim.decisions += 1
        if actions := policy.decide(sim.snapshot()):
            sim.apply(actions)
    return sim.result(policy.name)


def _fcfs_on(sim):
    fcfs = make_policy("fcfs")
    fcfs.reset(PolicyContext(sim.cluster, sim.tuner, np.random.default_rng(0)))
    return _finish(sim, fcfs)


@pytest.mark.parametrize("at_step", [1, 40, 90])
def test_a_clone_runs_apart_and_equals_a_deep_copy(setting, at_step):
    sc, trace, whole = setting
    sim, policy = _started(sc, trace)
    for _ in range(at_step):
        assert sim.advance()
        sim.decisions += 1
        if actions := policy.decide(sim.snapshot()):
            sim.apply(actions)
    before = pickle.dumps(sim.state())
    reference = _fcfs_on(copy.deepcopy(sim))  # the generic deep copy
    fast = _fcfs_on(sim.clone())
    assert fast.jobs == reference.jobs and fast.summary == reference.summary
    assert pickle.dumps(sim.state()) == before  # the clone's run left the original as it was
    rest = _finish(sim, policy)
    assert rest.jobs == whole.jobs and rest.summary == whole.summary


def test_a_state_restored_twice_gives_two_independent_runs(setting):
    sc, trace, _ = setting
    sim, policy = _started(sc, trace)
    for _ in range(50):
        assert sim.advance()
        sim.decisions += 1
        if actions := policy.decide(sim.snapshot()):
            sim.apply(actions)
    state = pickle.loads(pickle.dumps(sim.state()))  # as a rollout worker receives it
    first, _ = _started(sc, trace, "fcfs")
    first.restore_state(state)
    a = _fcfs_on(first)
    second, _ = _started(sc, trace, "fcfs")
    second.restore_state(state)  # the first run must not have changed the saved state
    b = _fcfs_on(second)
    assert a.jobs == b.jobs and a.summary == b.summary
    assert _fcfs_on(sim.clone()).jobs == a.jobs
