"""Rollouts with a network policy taking over (the rollout policy of expert iteration)."""

from __future__ import annotations

import numpy as np
import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.rl.network_rollouts import NetworkRollouts
from crius_gym.rl.ppo import make_model, resolve_hyperparams
from crius_gym.rl.train import build_vec_env


@pytest.fixture(scope="module")
def untrained():
    """The default network before training: zero-init scorers and the hint, i.e. Crius."""
    hp = resolve_hyperparams("tiny", overrides=["n_envs=1"])
    venv = build_vec_env(hp, "tiny", EnvConfig(**dict(hp.env)), 0)
    return make_model(hp, venv, 0, None), EnvConfig(**dict(hp.env))


def _decision(cfg: EnvConfig, steps: int) -> CriusEnv:
    env = CriusEnv("tiny", cfg)
    env.reset(options={"split": "val", "index": 0})
    for _ in range(steps):
        env.step(env.guide_action())
    return env


def test_the_untrained_network_rolls_out_as_crius_does(untrained):
    model, cfg = untrained
    env = _decision(cfg, 4)
    before = (env.sim.now_s, env.action_masks().copy())
    valid = [int(a) for a in np.flatnonzero(env.action_masks())]
    rollouts = NetworkRollouts(model)
    got = rollouts.costs(env, valid)
    assert got == pytest.approx([env.rollout_cost(a, future=False) for a in valid], rel=1e-9)
    assert env.sim.now_s == before[0] and np.array_equal(env.action_masks(), before[1])
    # One batched pass per lockstep step, not one per branch.
    assert rollouts.stats.forward_passes < rollouts.stats.steps


def test_a_horizon_covering_the_episode_is_the_full_rollout(untrained):
    model, cfg = untrained
    env = _decision(cfg, 3)
    valid = [int(a) for a in np.flatnonzero(env.action_masks())]
    full = NetworkRollouts(model).costs(env, valid)
    long = NetworkRollouts(model, horizon_s=1e12)
    assert long.costs(env, valid) == full and long.stats.truncated == 0
    short = NetworkRollouts(model, horizon_s=1.0)
    costs = short.costs(env, valid)
    assert short.stats.truncated > 0 and all(np.isfinite(costs))


@pytest.mark.parametrize("tail", ["list", "upgrade", "speed"])
def test_every_tail_values_a_truncated_rollout_and_none_touches_a_full_one(untrained, tail):
    model, cfg = untrained
    env = _decision(cfg, 3)
    valid = [int(a) for a in np.flatnonzero(env.action_masks())]
    full = NetworkRollouts(model).costs(env, valid)
    assert NetworkRollouts(model, horizon_s=1e12, tail=tail).costs(env, valid) == full
    short = NetworkRollouts(model, horizon_s=1.0, tail=tail)
    costs = short.costs(env, valid)
    assert short.stats.truncated > 0 and all(np.isfinite(c) and c > 0 for c in costs)


def test_the_speed_tail_never_exceeds_the_list_schedule(untrained):
    """The speed tail starts waiting jobs at once on their best Cells; the list schedule queues."""
    model, cfg = untrained
    env = _decision(cfg, 3)
    valid = [int(a) for a in np.flatnonzero(env.action_masks())]
    by_tail = {
        t: NetworkRollouts(model, horizon_s=1.0, tail=t).costs(env, valid)
        for t in ("list", "speed")
    }
    assert all(s <= q + 1e-6 for s, q in zip(by_tail["speed"], by_tail["list"], strict=True))
    with pytest.raises(ValueError, match="tail must be one of"):
        NetworkRollouts(model, horizon_s=1.0, tail="nope")  # type: ignore[arg-type]


def _vine(overrides, tmp_path=None):
    from crius_gym.rl.ppo import resolve_hyperparams as resolve

    hp = resolve(
        "tiny",
        overrides=["vine_fraction=0.5", "n_steps=16", "n_envs=2", "vine_future=false", *overrides],
    )
    venv = build_vec_env(hp, "tiny", EnvConfig(**dict(hp.env)), 0)
    return make_model(hp, venv, 0, None)


@pytest.mark.parametrize("workers", [0, 1])
def test_a_round_labelled_by_the_untrained_network_is_a_round_labelled_by_crius(tmp_path, workers):
    """Expert iteration's first round: the rollout policy is the untrained network, i.e. Crius."""
    zero = _vine([])
    zero.save(tmp_path / "round0.zip")
    runs = []
    for extra in ([], [f"vine_rollout_policy={tmp_path / 'round0.zip'}"]):
        model = _vine([f"rollout_workers={workers}", *extra])
        model.learn(64)
        model.close_pool()
        runs.append(model.replay.batch(np.arange(len(model.replay)))[2])
    assert len(runs[0]) > 0
    assert np.array_equal(runs[0], runs[1])


def test_expert_iteration_settings_are_checked():
    from crius_gym.errors import InputFileError
    from crius_gym.rl.ppo import resolve_hyperparams as resolve

    # Overrides are merged into agents/ppo.yaml's scenario block: errors name that file.

    with pytest.raises(InputFileError, match="set vine_future false"):
        resolve("tiny", overrides=["vine_future=true", "vine_rollout_policy=a.zip"])
    with pytest.raises(InputFileError, match=r"saved policy's \.zip"):
        resolve("tiny", overrides=["init_policy=folder"])
    with pytest.raises(InputFileError, match="vine_horizon_s must be > 0"):
        resolve("tiny", overrides=["vine_horizon_s=0"])


def test_the_truncation_audit_finds_no_change_when_the_horizon_covers_the_episode(untrained):
    from crius_gym.eval.truncation import audit_truncation
    from crius_gym.scenarios import load_scenario

    model, cfg = untrained
    rows = audit_truncation(
        model, cfg, load_scenario("tiny"), "val", [0], 2, [1e12, 1.0], ("list", "upgrade")
    )
    assert rows
    for r in rows:
        for tail in ("list", "upgrade"):
            assert r.truncated[tail, 1e12] == r.full and r.lost_s[tail, 1e12] == 0.0
            # Judged by full rollouts the full label is the cheapest, so nothing is negative.
            assert r.lost_s[tail, 1.0] >= 0.0 and r.full_gain_s >= 0.0
    # A one-second horizon values nearly everything by the list schedule: labels change.
    assert any(r.truncated["list", 1.0] != r.full for r in rows)
