"""Model selection: validation sets per scenario, each weighing the same in the score."""

import math

import pytest
from stable_baselines3.common.env_util import make_vec_env

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.rl.callbacks import ValidationCallback, macro_score
from crius_gym.rl.ppo import make_model, resolve_hyperparams
from crius_gym.rl.train import validation_sets
from crius_gym.scenarios import load_scenario


def test_macro_score_weighs_each_set_the_same():
    # One set: its own mean and half-width.
    assert macro_score([(0.9, 0.05)]) == (0.9, 0.05)
    # Two sets: the mean of their means, whatever their sizes; half-widths combined in quadrature.
    mean, half = macro_score([(0.9, 0.03), (2.9, 0.04)])
    assert mean == pytest.approx(1.9)
    assert half == pytest.approx(0.025)
    # A set with one trace (no CI) counts its mean; its NaN half-width adds nothing.
    mean, half = macro_score([(1.0, math.nan), (0.8, 0.02)])
    assert mean == pytest.approx(0.9) and half == pytest.approx(0.01)


def test_validation_sets_cap_traces_by_the_scenario_and_name_each_set():
    hp = resolve_hyperparams("tiny", overrides=["eval_traces=16", "eval_scenarios=[tiny, tiny]"])
    sc = load_scenario("tiny")
    sets = validation_sets(sc, hp, EnvConfig(), seed=0)
    assert [vs.name for vs in sets] == ["tiny", "tiny"]
    # tiny declares 2 validation traces: eval_traces is a cap, not a count to exceed it.
    assert [len(vs.traces) for vs in sets] == [sc.splits.validation_traces] * 2
    assert all(len(vs.reference) == len(vs.traces) for vs in sets)


def test_several_sets_give_a_column_each_and_the_untrained_policy_is_crius(tmp_path):
    overrides = ["eval_scenarios=[tiny, hetero-64]", "eval_traces=1"]
    hp = resolve_hyperparams("tiny", overrides=overrides)
    sets = validation_sets(load_scenario("tiny"), hp, EnvConfig(), seed=0)
    venv = make_vec_env(lambda: CriusEnv("tiny"), n_envs=1, seed=0)
    callback = ValidationCallback(sets, eval_freq=10, save_dir=tmp_path)
    callback.init_callback(make_model(hp, venv, 0, None))
    row = callback.evaluate()
    # zero_init + the hint: the untrained network takes Crius's action everywhere.
    assert row["eval_jct_ratio[tiny]"] == pytest.approx(1.0)
    assert row["eval_jct_ratio[hetero-64]"] == pytest.approx(1.0)
    assert row["eval_jct_ratio"] == pytest.approx(1.0)
    assert row["eval_traces"] == 2
