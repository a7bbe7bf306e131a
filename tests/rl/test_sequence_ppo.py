"""The per-sequence baseline: known answers, and the same advantages for the same seed."""

from __future__ import annotations

import numpy as np
import pytest

from crius_gym.env.config import EnvConfig
from crius_gym.errors import InputFileError
from crius_gym.rl.ppo import make_model, resolve_hyperparams
from crius_gym.rl.sequence_ppo import sequence_advantages
from crius_gym.rl.train import build_vec_env


def test_known_answer_two_rollouts_of_one_sequence():
    # Rollout A: rewards -1, -1 at t = 0, 10, ends at 20; rollout B: -3 at t = 0, ends at 20.
    a = (np.array([-1.0, -1.0]), np.array([0.0, 10.0]), 20.0)
    b = (np.array([-3.0]), np.array([0.0]), 20.0)
    (rets,), (advs,) = sequence_advantages([[a, b]], gamma=1.0)
    assert rets[0].tolist() == [-2.0, -1.0] and rets[1].tolist() == [-3.0]
    # At t = 0 the baseline is the mean of -2 and -3; at t = 10, of -1 and B's -1.5 (linear).
    assert advs[0].tolist() == pytest.approx([-2 + 2.5, -1 + 1.25])
    assert advs[1].tolist() == pytest.approx([-3 + 2.5])


def test_identical_rollouts_have_zero_advantage():
    r = (np.array([-1.0, -2.0, -0.5]), np.array([0.0, 5.0, 7.0]), 9.0)
    _, (advs,) = sequence_advantages([[r, r, r]], gamma=0.99)
    assert all(np.allclose(a, 0.0) for a in advs)


def _advantages(seed: int) -> np.ndarray:
    hp = resolve_hyperparams(
        "tiny",
        overrides=["n_envs=4", "sequences=2", "vine_fraction=0", "policy_kwargs.hint_weight=3"],
    )
    venv = build_vec_env(hp, "tiny", EnvConfig(**dict(hp.env)), seed)
    model = make_model(hp, venv, seed, None)
    model.learn(1, reset_num_timesteps=True)  # one rollout phase (and one update)
    return np.array(model.rollout_buffer.advantages).ravel()


def test_same_sequence_and_seed_give_the_same_advantages():
    a, b = _advantages(3), _advantages(3)
    assert len(a) > 0 and np.array_equal(a, b)
    assert not np.array_equal(a, _advantages(4)[: len(a)]) or len(a) != len(_advantages(4))


def test_sequences_need_a_multiple_of_envs():
    with pytest.raises(InputFileError, match="multiple"):
        resolve_hyperparams("tiny", overrides=["n_envs=3", "sequences=2"])
