"""The lookahead with the network as its rollout policy (crius_gym/rl/network_lookahead.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from crius_gym.rl.agent_policy import AgentPolicy
from crius_gym.rl.network_lookahead import NetworkLookaheadOptions, NetworkLookaheadPolicy
from crius_gym.scenarios import load_scenario
from crius_gym.workload.job import Trace

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference_policy"


def _trace(jobs: int = 12) -> tuple[object, object, Trace]:
    sc = load_scenario("tiny")
    tuner = sc.make_tuner(None, None)
    trace = sc.own_trace(None, tuner)
    return sc, tuner, dataclasses.replace(trace, jobs=trace.jobs[:jobs])


def test_with_one_candidate_and_no_waiting_it_is_the_bare_network() -> None:
    sc, tuner, trace = _trace()
    bare = sc.make_simulator(tuner, None, None).run(trace, AgentPolicy(REFERENCE, sc))
    one = NetworkLookaheadPolicy(REFERENCE, sc, NetworkLookaheadOptions(top_k=1, wait=False))
    look = sc.make_simulator(tuner, None, None).run(trace, one)
    assert [j.finish_s for j in look.jobs] == [j.finish_s for j in bare.jobs]
    assert one.stats.choices == 0 and one.name == "reference_policy+look"


def test_it_values_candidates_and_never_does_worse_than_its_rollouts_say() -> None:
    sc, tuner, trace = _trace()
    look = NetworkLookaheadPolicy(REFERENCE, sc, NetworkLookaheadOptions(top_k=3, horizon_s=None))
    sc.make_simulator(tuner, None, None).run(trace, look)
    assert look.stats.choices > 0 and look.stats.candidates >= 2 * look.stats.choices
    assert len(look.stats.seconds) > 0


def test_the_logit_gap_prunes_candidates_and_a_huge_one_prunes_none() -> None:
    sc, tuner, trace = _trace()
    runs = {}
    for gap in (None, 1e9, 0.0):
        policy = NetworkLookaheadPolicy(
            REFERENCE, sc, NetworkLookaheadOptions(top_k=4, logit_gap=gap)
        )
        result = sc.make_simulator(tuner, None, None).run(trace, policy)
        runs[gap] = ([j.finish_s for j in result.jobs], policy.stats)
    assert runs[1e9][0] == runs[None][0]
    assert runs[1e9][1].candidates == runs[None][1].candidates
    # Only actions tied with the network's own in logits stay candidates at a zero gap.
    assert runs[0.0][1].candidates < runs[None][1].candidates


def test_its_decisions_do_not_read_the_traces_future() -> None:
    """Two traces equal up to a time: the decisions before it are the same."""
    sc, tuner, trace = _trace(16)
    cut_s = trace.jobs[8].arrival_s
    head = dataclasses.replace(trace, jobs=[j for j in trace.jobs if j.arrival_s < cut_s])
    logs = []
    for t in (trace, head):
        policy = NetworkLookaheadPolicy(REFERENCE, sc, NetworkLookaheadOptions(top_k=3))
        log: list[tuple[float, str]] = []
        decide = policy.decide

        def logged(snapshot, decide=decide, log=log):  # type: ignore[no-untyped-def]
            out = decide(snapshot)
            if snapshot.now_s < cut_s:
                log.append((snapshot.now_s, repr(out)))
            return out

        policy.decide = logged  # type: ignore[method-assign]
        sc.make_simulator(tuner, None, None).run(t, policy)
        logs.append(log)
    assert logs[0] and logs[0] == logs[1]


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("top_k", 0, "top_k"),
        ("horizon_s", 0.0, "horizon_s"),
        ("tail", "nope", "tail"),
        ("margin", 1.0, "margin"),
        ("logit_gap", -1.0, "logit_gap"),
    ],
)
def test_bad_options_are_refused(field: str, value: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        NetworkLookaheadOptions(**{field: value})  # type: ignore[arg-type]
