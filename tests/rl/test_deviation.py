"""The guide margin: the gate's rule, its selection on validation, and its plumbing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.errors import ConfigError
from crius_gym.policies.registry import make_policy
from crius_gym.rl.agent import GreedyActor, run_model
from crius_gym.rl.deviation import (
    deployed_envelope,
    deployed_margin,
    measure_envelope,
    parse_margin,
    select_guide_margin,
    selection_scenarios,
)
from crius_gym.rl.envelope import Envelope
from crius_gym.rl.ppo import PPOHyperparams
from crius_gym.rl.saved import load_policy, read_metadata
from crius_gym.scenarios import load_scenario
from tests.rl.test_reference_policy import reference  # noqa: F401  (fixture)


class _Fixed(GreedyActor):
    """A GreedyActor whose logits are given (the gate's rule without a network)."""

    def __init__(self, logits: np.ndarray, margin: float, envelope: Envelope | None = None) -> None:
        self._fixed = logits
        self.guide_margin = margin
        self.envelope = envelope

    def logits(self, obs):  # type: ignore[override]
        return self._fixed


@pytest.mark.parametrize(
    ("margin", "guide", "expected"),
    [
        (0.0, 1, 0),  # no gate: the argmax
        (0.4, 1, 1),  # prefers action 0 by 0.3 < 0.4: the guide's
        (0.2, 1, 0),  # by 0.3 >= 0.2: its own
        (math.inf, 2, 2),  # inf: always the guide
        (0.4, 0, 0),  # agrees with the guide
        (0.4, None, 0),  # no guide: the argmax
    ],
)
def test_gate_departs_only_with_enough_preference(margin, guide, expected):
    actor = _Fixed(np.array([1.3, 1.0, -2.0, 5.0]), margin)
    mask = np.array([True, True, True, False])  # the masked action 3 never counts
    assert actor({}, mask, guide) == expected


def test_parse_margin_and_hyperparams_refuse_bad_values():
    assert parse_margin("inf") == math.inf and parse_margin(0.5) == 0.5
    with pytest.raises(ConfigError, match="not a number"):
        parse_margin("wide")
    with pytest.raises(ConfigError, match=">= 0"):
        parse_margin(-1)
    with pytest.raises(ConfigError, match="deploy_margins"):
        PPOHyperparams(deploy_margins=(0.0, -0.5))
    with pytest.raises(ConfigError, match="deploy_score"):
        PPOHyperparams(deploy_score="median")  # type: ignore[arg-type]
    assert PPOHyperparams(deploy_margins=["inf", 1]).deploy_margins == (math.inf, 1.0)  # type: ignore[arg-type]
    assert deployed_margin({}) == 0.0
    assert deployed_margin({"deployment": {"guide_margin": "inf"}}) == math.inf


def test_selection_scenarios_are_the_mixture_components_once():
    names = [s.name for s in selection_scenarios(load_scenario("mix"), ["hetero-64", "tiny"])]
    assert names[0] == "hetero-64" and names.count("hetero-64") == 1 and names[-1] == "tiny"
    assert len(names) == len(load_scenario("mix").mix) + 1


def test_infinite_margin_is_the_guide_and_selection_scores_it_one(reference):  # noqa: F811
    meta = read_metadata(reference)
    cfg = EnvConfig(**{**meta["env_config"], "max_decisions": 10**12})
    sc = load_scenario("tiny")
    model, _ = load_policy(reference, CriusEnv(sc, cfg))
    trace = sc.synthetic_trace("val", 0)
    guided, _ = run_model(model, CriusEnv(sc, cfg), trace, guide_margin=math.inf)
    crius = sc.make_simulator().run(trace, make_policy("crius", scenario=sc), seed=0)
    assert guided.summary.avg_jct_s == pytest.approx(crius.summary.avg_jct_s)
    sel = select_guide_margin(model, cfg, [sc], traces=1, margins=[0.0, 1.0])
    assert sel.scores[math.inf] == 1.0 and set(sel.scores) == {0.0, 1.0, math.inf}
    assert sel.scores[sel.guide_margin] <= min(sel.scores.values()) + 0.002
    assert sel.as_metadata("cmd")["guide_margin"] in (0.0, 1.0, "inf")
    assert sel.score == "mean" and "mean" in sel.as_metadata("cmd")["score"]
    # Long overloaded traces are a set of their own, scored like a scenario.
    hard = select_guide_margin(
        model,
        cfg,
        [sc],
        traces=1,
        margins=[0.0],
        score="worst",
        stress_traces=1,
        stress_load=1.5,
        stress_jobs=24,
    )
    assert hard.traces == {"tiny": 1, "tiny@1.5x24": 1}
    assert hard.scores[0.0] == max(
        hard.per_scenario[("tiny", 0.0)], hard.per_scenario[("tiny@1.5x24", 0.0)]
    )
    with pytest.raises(ConfigError, match="score"):
        select_guide_margin(model, cfg, [sc], traces=1, margins=[0.0], score="median")


@pytest.mark.parametrize(
    ("waiting", "running", "guide", "expected"),
    [
        (3, 10, 1, 0),  # inside the envelope: its own argmax
        (4, 10, 1, 1),  # more jobs wait than it ever saw: the guide's
        (3, 11, 1, 1),  # more jobs run than it ever saw: the guide's
        (9, 20, None, 0),  # no guide to fall back on: the argmax
    ],
)
def test_outside_its_envelope_the_agent_takes_the_guides_action(waiting, running, guide, expected):
    actor = _Fixed(np.array([1.3, 1.0, -2.0]), 0.0, Envelope(waiting=3, running=10))
    assert actor({}, np.ones(3, dtype=bool), guide, waiting, running) == expected
    # An envelope recorded before the running bound existed bounds the queue only.
    assert _Fixed(np.array([1.3, 1.0]), 0.0, Envelope(3))({}, np.ones(2, bool), 1, 3, 999) == 0


def test_envelope_is_measured_recorded_and_read_back(reference):  # noqa: F811
    meta = read_metadata(reference)
    cfg = EnvConfig(**meta["env_config"])
    sc = load_scenario("tiny")
    model, _ = load_policy(reference, CriusEnv(sc, cfg))
    most = measure_envelope(model, cfg, sc, episodes=2)
    assert most == measure_envelope(model, cfg, sc, episodes=2)  # fixed episodes
    assert 0 < most.waiting <= sc.splits.train_episode_jobs
    assert most.running is not None and 0 < most.running <= sc.splits.train_episode_jobs
    # An envelope of 0 waiting and 0 running jobs hands every decision with a job in the system
    # to the guide: that is Crius's run.
    trace = sc.synthetic_trace("val", 0)
    run_cfg = EnvConfig(**{**meta["env_config"], "max_decisions": 10**12})
    kept, _ = run_model(model, CriusEnv(sc, run_cfg), trace, envelope=Envelope(0, 0))
    crius = sc.make_simulator().run(trace, make_policy("crius", scenario=sc), seed=0)
    assert kept.summary.avg_jct_s == pytest.approx(crius.summary.avg_jct_s)
    sel = select_guide_margin(
        model, cfg, [sc], traces=1, margins=[0.0], envelope=most, envelope_episodes=2
    )
    block = sel.as_metadata("cmd")
    assert block["max_waiting"] == most.waiting and block["max_running"] == most.running
    assert "2 episodes" in block["envelope"]
    assert deployed_envelope({"deployment": block}) == most
    assert deployed_envelope({}) is None
    assert deployed_envelope({"deployment": {"max_waiting": 5}}) == Envelope(5)  # older records
    for bad in (-1, 2.5, "many", True):
        with pytest.raises(ConfigError, match="max_waiting"):
            deployed_envelope({"deployment": {"max_waiting": bad}})
        with pytest.raises(ConfigError, match="max_running"):
            deployed_envelope({"deployment": {"max_waiting": 5, "max_running": bad}})
    with pytest.raises(ConfigError, match="without"):
        deployed_envelope({"deployment": {"max_running": 5}})
    with pytest.raises(ConfigError, match="episodes"):
        measure_envelope(model, cfg, sc, episodes=0)
