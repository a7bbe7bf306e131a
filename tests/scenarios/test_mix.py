"""Mixtures of scenarios: loading, the component of each training episode, the env on them."""

from __future__ import annotations

import collections

import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.errors import InputFileError
from crius_gym.scenarios import load_scenario, parse_scenario

TINY = {
    "cluster": [{"gpu": "a40", "nodes": 2, "gpus_per_node": 2}],
    "workload": {"load": 0.8, "synthetic": {"num_jobs": 10, "iterations_max": 2000}},
}


def test_default_mixture_spans_sizes_types_loads_and_workloads():
    mix = load_scenario("mix")
    comps = [c for c, _ in mix.mix]
    gpus = [c.cluster.num_gpus for c in comps]
    assert min(gpus) <= 64 and max(gpus) >= 1000
    per_node = {g.gpus_per_node for c in comps for g in c.cluster.groups}
    assert min(per_node) == 2 and max(per_node) == 16
    assert {len(c.cluster.groups) for c in comps} == {2, 3, 4}
    loads = [c.workload.load for c in comps]
    assert min(loads) == 0.5 and max(loads) == 4.0  # 4.0: the crowded component
    mus = {round(c.workload.synthetic.iterations_log_mu, 3) for c in comps}
    assert len(mus) == 3  # Philly-, Helios- and PAI-like
    held_out = {load_scenario(n).cluster for n in ("crius-testbed", "crius-sim-1280")}
    assert not held_out & {c.cluster for c in comps}


def test_component_of_an_episode_is_deterministic_and_follows_the_weights():
    mix = load_scenario("mix")
    picks = [mix.mix_component(i) for i in range(3000)]
    assert picks == [mix.mix_component(i) for i in range(3000)]
    share = collections.Counter(picks)[0] / len(picks)
    weights = [w for _, w in mix.mix]
    assert share == pytest.approx(weights[0] / sum(weights), abs=0.03)


def test_env_switches_clusters_with_one_observation_space():
    env = CriusEnv("mix")
    seen = set()
    for i in range(40):
        obs, _ = env.reset(options={"split": "train", "index": i})
        assert env.observation_space.contains(obs)
        seen.add(env.world_scenario.name)
        assert (
            env.world_scenario.name
            == load_scenario("mix").mix[load_scenario("mix").mix_component(i)][0].name
        )
    assert len(seen) >= 4


def test_inline_components_and_errors():
    raw = {"name": "m", "mix": [{"scenario": TINY, "weight": 2}, {"scenario": "tiny"}]}
    mix = parse_scenario(raw, "m.yaml", "m")
    assert [w for _, w in mix.mix] == [2.0, 1.0] and mix.mix[0][0].name == "m-0"
    for bad, field in (
        ({"mix": []}, "mix"),
        ({"mix": [{"scenario": "tiny", "weight": 0}]}, "mix[0].weight"),
        ({"mix": [{"scenario": "no-such"}]}, "mix[0].scenario"),
        ({"mix": [{"scenario": "tiny"}], "cluster": []}, "cluster"),
    ):
        with pytest.raises(InputFileError) as err:
            parse_scenario(bad, "m.yaml", "m")
        assert err.value.field == field
