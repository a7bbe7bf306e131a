"""Learning sanity (slow): from a warm start that is Crius, the default agent learns past it."""

import numpy as np
import pytest
import torch

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.policies.registry import make_policy
from crius_gym.rl.agent import run_model
from crius_gym.rl.ppo import make_model, resolve_hyperparams
from crius_gym.rl.train import build_vec_env
from crius_gym.scenarios import load_scenario


def ratio_to_crius(model, sc, traces):
    env = CriusEnv(sc, {"max_decisions": 10**12})
    mine = [run_model(model, env, t)[0].summary.avg_jct_s for t in traces]
    crius = [
        sc.make_simulator(env.tuner).run(t, make_policy("crius")).summary.avg_jct_s for t in traces
    ]
    return float(np.mean(np.array(mine) / np.array(crius)))


@pytest.mark.slow
def test_vine_ppo_improves_on_the_clone_on_tiny():
    torch.set_num_threads(1)
    sc = load_scenario("tiny")
    traces = [sc.synthetic_trace("val", i) for i in range(4)]
    hp = resolve_hyperparams("tiny", overrides=["n_envs=4", "vine_fraction=0.2"])
    venv = build_vec_env(hp, "tiny", EnvConfig(**dict(hp.env)), 0)
    model = make_model(hp, venv, 0, None)
    assert ratio_to_crius(model, sc, traces) == pytest.approx(1.0)  # the clone is Crius
    model.learn(12_000)  # about 20 updates; the first uses no labels (a lag of one phase)
    assert ratio_to_crius(model, sc, traces) < 0.97
