"""A saved agent behind the Policy boundary decides as it does in its env."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.errors import ConfigError
from crius_gym.rl.agent import run_model
from crius_gym.rl.agent_policy import AgentPolicy
from crius_gym.rl.deviation import recorded_deployment
from crius_gym.rl.saved import load_policy, model_metadata, policy_file
from crius_gym.scenarios import load_scenario

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference_policy"


@pytest.mark.parametrize("deployment", ["bare", "recorded"])
def test_a_simulator_run_through_the_adapter_equals_the_env_episode(deployment: str) -> None:
    sc = load_scenario("tiny")
    policy = AgentPolicy(REFERENCE, sc, deployment=deployment)
    tuner = policy._env.tuner
    trace = sc.own_trace(None, tuner)
    via_policy = sc.make_simulator(tuner, None, None).run(trace, policy)
    path = policy_file(REFERENCE)
    meta = model_metadata(path)
    env = CriusEnv(sc, EnvConfig(**{**meta["env_config"], "max_decisions": 10**12}))
    model, _ = load_policy(path, env)
    margin, envelope = recorded_deployment(path, meta) if deployment == "recorded" else (0.0, None)
    via_env, invalid = run_model(model, env, trace, True, 0, margin, envelope)
    assert invalid == 0 and policy.steps > 0
    assert [j.finish_s for j in via_policy.jobs] == [j.finish_s for j in via_env.jobs]
    assert via_policy.summary.avg_jct_s == via_env.summary.avg_jct_s


def test_the_adapter_refuses_another_cluster_and_a_bad_deployment() -> None:
    with pytest.raises(ValueError, match="deployment"):
        AgentPolicy(REFERENCE, load_scenario("tiny"), deployment="half")
    policy = AgentPolicy(REFERENCE, load_scenario("tiny"))
    other = load_scenario("hetero-64")
    sim = other.make_simulator(other.make_tuner(None, None), None, None)
    small = other.synthetic_trace("test", 0, tuner=sim.tuner)
    small = dataclasses.replace(small, jobs=small.jobs[:3])
    with pytest.raises(ConfigError, match="cluster"):
        sim.run(small, policy)


def test_a_lookahead_over_the_network_with_no_alternatives_is_the_network() -> None:
    from crius_gym.policies.lookahead import LookaheadOptions, LookaheadPolicy

    sc = load_scenario("tiny")
    agent = AgentPolicy(REFERENCE, sc)
    tuner = agent._env.tuner
    trace = sc.own_trace(None, tuner)
    trace = dataclasses.replace(trace, jobs=trace.jobs[:10])
    plain = sc.make_simulator(tuner, None, None).run(trace, agent)
    look = LookaheadPolicy(
        LookaheadOptions(head_jobs=0, cells_per_job=1, running_jobs=0, margin=0.999999),
        base=AgentPolicy(REFERENCE, sc),
    )
    same = sc.make_simulator(tuner, None, None).run(trace, look)
    assert [j.finish_s for j in same.jobs] == [j.finish_s for j in plain.jobs]
    assert look.stats.rollouts > 0
