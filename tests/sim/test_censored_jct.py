"""``avg_jct_censored_s``: dropped jobs count (censored at the run's end), never lower it."""

from __future__ import annotations

import math

import pytest

from crius_gym.policies.registry import make_policy
from crius_gym.scenarios import load_scenario


@pytest.fixture(scope="module")
def tiny():
    sc = load_scenario("tiny")
    tuner = sc.make_tuner()
    return sc, tuner, sc.synthetic_trace("test", 0, tuner=tuner)


def test_equal_to_the_plain_average_when_every_job_finishes(tiny):
    sc, tuner, trace = tiny
    s = sc.make_simulator(tuner).run(trace, make_policy("crius")).summary
    assert s.unfinished == 0 and s.rejected == 0
    assert s.avg_jct_censored_s == pytest.approx(s.avg_jct_s)


def test_unfinished_jobs_are_censored_at_the_horizon(tiny):
    sc, tuner, trace = tiny
    full = sc.make_simulator(tuner).run(trace, make_policy("crius"))
    horizon = full.summary.makespan_s / 3
    res = sc.make_simulator(tuner).run(trace, make_policy("crius"), horizon_s=horizon)
    s = res.summary
    assert s.unfinished > 0
    arrived = [j for j in res.jobs if j.arrival_s <= horizon]
    want = sum(j.jct_s if j.status == "finished" else horizon - j.arrival_s for j in arrived) / len(
        arrived
    )
    assert s.avg_jct_censored_s == pytest.approx(want)
    assert math.isnan(s.avg_jct_s) or s.avg_jct_censored_s != s.avg_jct_s
