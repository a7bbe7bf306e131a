"""The warm start is Crius: the untrained default policy agrees with it on held-out decisions."""

import dataclasses

import numpy as np

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.rl.imitation import agreement, behaviour_clone, collect_demonstrations
from crius_gym.rl.ppo import make_model, resolve_hyperparams
from crius_gym.rl.train import build_vec_env
from crius_gym.scenarios import load_scenario


def _model(overrides):
    hp = resolve_hyperparams("tiny", overrides=overrides)
    venv = build_vec_env(hp, "tiny", EnvConfig(**dict(hp.env)), 0)
    return hp, make_model(hp, venv, 0, None)


def _held_out(config: EnvConfig):
    sc = load_scenario("tiny")
    env = CriusEnv(sc, dataclasses.replace(config, max_decisions=10**12))
    traces = [sc.synthetic_trace("val", i) for i in range(2)]
    return env, collect_demonstrations(env, "crius", 0, 0.99, 0, traces)


def test_untrained_default_policy_agrees_with_crius_on_every_held_out_decision():
    hp, model = _model([])
    _, held = _held_out(EnvConfig(**dict(hp.env)))
    assert len(held) > 20
    assert agreement(model, held) == 1.0


def test_without_the_hint_the_untrained_policy_is_not_crius_and_cloning_moves_it():
    hp, model = _model(["env.guide_hint=false", "policy_kwargs.hint_weight=0.0"])
    env, held = _held_out(EnvConfig(**dict(hp.env)))
    before = agreement(model, held)
    assert before < 0.9
    demos = collect_demonstrations(env, "crius", 2, 0.99, 1)
    behaviour_clone(model, demos, 10, 64, 0, 1e-3)
    after = agreement(model, held)
    assert np.isfinite(after) and after > before
