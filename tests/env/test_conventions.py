"""Gymnasium and SB3 conventions (issue 13): ids registered by ``import crius_gym`` without
heavy imports, ``make_vec_env`` and ``gym.make_vec``, metrics on a TimeLimit truncation,
``rgb_array`` frames, unknown render modes warn, and the RLlib-style masked observation."""

import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
from stable_baselines3.common.env_util import make_vec_env

import crius_gym
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.render import FRAME_SHAPE
from crius_gym.env.wrappers import DictMaskObservation

TINY = "crius_gym/Tiny-v4"


def test_import_registers_every_scenario_cheaply():
    code = (
        "import sys, crius_gym, gymnasium as gym; "
        "assert 'crius_gym/Hetero64-v4' in gym.registry; "
        "print(','.join(m for m in ('torch', 'stable_baselines3', 'crius_gym.sim.simulator') "
        "if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""  # nothing heavy imported by the registration
    assert len(crius_gym.REGISTERED_IDS) >= 5


def test_make_vec_env_with_sb3_defaults_and_make_vec():
    venv = make_vec_env(TINY, n_envs=2)  # passes render_mode="rgb_array"
    obs = venv.reset()
    assert obs["action_mask"].shape[0] == 2
    venv.close()
    vec = gym.make_vec(TINY, num_envs=2)
    obs, _ = vec.reset(seed=0)
    assert obs["action_mask"].shape[0] == 2
    vec.close()


def test_time_limit_truncation_carries_the_metrics():
    env = gym.make(TINY, max_episode_steps=5)
    env.reset(seed=0)
    wait = env.unwrapped.config.num_actions - 1
    steps, terminated, truncated = 0, False, False
    while not (terminated or truncated) and steps < 50:
        _, _, terminated, truncated, info = env.step(wait)
        steps += 1
    assert truncated and steps == 5
    assert "avg_jct_s" in info and "episode_metrics" in info
    assert info["decisions"] == 5  # agent decisions; the simulator's are sim_decisions
    assert "sim_decisions" in info
    assert gym.spec(TINY).max_episode_steps is not None


def test_rgb_array_frame_has_the_documented_shape():
    env = gym.make("crius_gym/Hetero64-v4", render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == FRAME_SHAPE and frame.dtype == np.uint8
    assert isinstance(gym.make(TINY, render_mode="ansi").unwrapped.render(), type(None) | str)


def test_unknown_render_mode_warns_not_raises():
    from crius_gym.env.cluster_env import CriusEnv

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = CriusEnv("tiny", render_mode="human")
    assert any("render_mode 'human'" in str(w.message) for w in caught)
    env.reset(seed=0)
    assert env.render() is None


def test_dict_mask_observation_for_rllib_style_masking():
    env = DictMaskObservation(gym.make(TINY))
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"observations", "action_mask"}
    assert "action_mask" not in obs["observations"]
    assert env.observation_space.contains(obs)
    mask = obs["action_mask"]
    _, _, _, _, _ = env.step(int(np.flatnonzero(mask)[0]))


@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_render_modes_are_declared(mode):
    assert mode in crius_gym.env.CriusEnv.metadata["render_modes"]


def test_observation_tables_unflatten_with_feature_names():
    env = gym.make("crius_gym/Hetero64-v4").unwrapped
    obs, _ = env.reset(seed=0)
    tables = env.observation_tables(obs)
    shapes = env.encoder.row_shapes
    assert set(tables) == set(shapes)
    for key, table in tables.items():
        assert table.shape == shapes[key]
        np.testing.assert_array_equal(table.reshape(-1), obs[key])  # a view of the same values
    # The first waiting job is in the window, and named columns read the same numbers.
    frames = env.observation_tables(frames=True)
    assert list(frames["jobs"].columns) == list(env.encoder.columns["jobs"])
    assert frames["jobs"]["present"].iloc[0] == 1.0
    np.testing.assert_array_equal(frames["cells"].to_numpy(), tables["cells"])
    bad = {**obs, "cells": obs["cells"][:-1]}
    with pytest.raises(ValueError, match="'cells'"):
        env.observation_tables(bad)


def test_feature_columns_come_from_the_names():
    """Every feature is written through its name's column (env/features.py ``_Columns``)."""
    from crius_gym.env import features as f

    assert f._J.requested_gpus == f.JOB_FEATURES.index("requested_gpus")
    assert f._C.is_current == f.CELL_FEATURES_BASE.index("is_current")
    assert f._G.guide_wait == f.GLOBAL_GUIDE_WAIT == f.GLOBAL_FEATURES.index("guide_wait")
    with pytest.raises(AttributeError, match="no feature column 'request_gpus'"):
        _ = f._J.request_gpus
    # A fresh observation sets 'present' on real rows only, by name, in every table.
    env = CriusEnv("tiny")
    obs, _ = env.reset(seed=0)
    tables = env.observation_tables(obs, frames=True)
    assert set(tables["cluster"]["present"]) <= {0.0, 1.0}
    assert tables["cluster"]["present"].sum() == len(env.sim.cluster.gpu_types)
    assert tables["cluster"]["share"].sum() == pytest.approx(1.0, abs=1e-6)
