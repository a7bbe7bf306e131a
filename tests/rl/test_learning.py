"""Learning sanity: PPO from scratch (no warm start) beats random actions on tiny."""

import numpy as np
import pytest
import torch
from stable_baselines3.common.env_util import make_vec_env

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.rl.agent import run_model
from crius_gym.rl.ppo import make_model, resolve_hyperparams
from crius_gym.sim.scenario import load_scenario


def random_policy_jct(env, traces, seeds=5):
    out = []
    for trace in traces:
        for s in range(seeds):
            rng = np.random.default_rng(s)
            env.reset(seed=s, options={"trace": trace})
            done = False
            while not done:
                a = int(rng.choice(np.flatnonzero(env.action_masks())))
                _, _, term, trunc, _ = env.step(a)
                done = term or trunc
            out.append(env.episode_result().summary.avg_jct_s)
    return float(np.mean(out))


@pytest.mark.slow
def test_ppo_beats_random_on_tiny():
    torch.set_num_threads(1)
    sc = load_scenario("tiny")
    traces = [sc.synthetic_trace("test", i) for i in range(4)]
    env = CriusEnv(sc)
    hp = resolve_hyperparams(
        "tiny", overrides=["warm_start=none", "n_steps=256", "learning_rate=3e-4", "ent_coef=0.01"]
    )
    venv = make_vec_env(lambda: CriusEnv(sc), n_envs=2, seed=0)
    model = make_model(hp, venv, 0, None)
    model.learn(30_000)
    ppo = float(np.mean([run_model(model, env, t)[0].summary.avg_jct_s for t in traces]))
    rnd = random_policy_jct(env, traces)
    assert ppo < 0.9 * rnd, (ppo, rnd)
