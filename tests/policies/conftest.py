"""Shared states of the policy tests."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from crius_gym.policies.registry import make_policy
from crius_gym.scenarios import load_scenario
from crius_gym.sim.policy import PolicyContext
from crius_gym.workload.job import Trace


@pytest.fixture(scope="module")
def hetero():
    """hetero-64 and the first 40 jobs of its first test trace."""
    sc = load_scenario("hetero-64")
    return sc, sc.synthetic_trace("test", 0).window(0, 40)


@pytest.fixture
def crowded(hetero):
    """Crius on hetero-64's first test trace with arrivals 20x denser, stopped at the first
    decision with at least two jobs waiting: (simulator, Crius)."""
    sc, trace = hetero
    crowded = Trace(
        "crowded",
        tuple(dataclasses.replace(j, arrival_s=j.arrival_s / 20) for j in trace.jobs),
    )
    sim = sc.make_simulator()
    policy = make_policy("crius")
    sim.reset(crowded, None, None)
    policy.reset(PolicyContext(sim.cluster, sim.tuner, np.random.default_rng(0)))
    while sim.advance():
        if len(sim.waiting_indices) >= 2:
            return sim, policy
        if actions := policy.decide(sim.snapshot()):
            sim.apply(actions)
    raise AssertionError("no decision with two jobs waiting")
