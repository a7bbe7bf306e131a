"""The fidelity report's comparison of two runs' decision sequences."""

from __future__ import annotations

import dataclasses

from crius_gym.plugins import make_policy
from crius_gym.runtime.fidelity import decision_agreement, same_placements
from crius_gym.scenarios import load_scenario


def _runs():  # type: ignore[no-untyped-def]
    sc = load_scenario("tiny")
    tuner = sc.make_tuner(None, None)
    trace = sc.own_trace(None, tuner)
    trace = dataclasses.replace(trace, jobs=trace.jobs[:8])
    sim = sc.make_simulator(tuner, None, None)
    return [sim.run(trace, make_policy(p, scenario=sc)) for p in ("fcfs", "fcfs", "crius")]


def test_identical_runs_agree_everywhere_and_different_ones_say_where() -> None:
    a, b, c = _runs()
    same, total, at_s = decision_agreement(a, b)
    assert same == total == len(a.segments) and at_s is None
    assert same_placements(a, b) == 1.0
    same, total, at_s = decision_agreement(a, c)
    assert same < total and at_s is not None
    first = sorted((s.start_s, s.job_index) for s in a.segments)[same]
    assert at_s == first[0]
