"""The env replays any trace file the project reads: ``reset(options={"trace": path})``."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.scenarios.trace_files import read_trace
from crius_gym.workload.mapping import JobMapping

HELIOS = (
    Path(__file__).parents[1] / "workload" / "fixtures" / "helios" / "Venus" / "cluster_log.csv"
)


def run(env, options):
    obs, info = env.reset(seed=0, options=options)
    decisions, done = 0, False
    while not done:
        action = int(np.flatnonzero(obs["action_mask"])[0])
        obs, _, terminated, truncated, info = env.step(action)
        done, decisions = terminated or truncated, decisions + 1
    return info, decisions


def test_a_trace_file_is_read_on_the_envs_cluster_and_replayed():
    env = CriusEnv("hetero-64")
    info, _ = run(env, {"trace": str(HELIOS), "trace_seed": 2})
    expected = read_trace(HELIOS, tuner=env.tuner, mapping=JobMapping(seed=2))
    assert info["episode_metrics"]["finished"] + info["episode_metrics"]["rejected"] == len(
        expected
    )
    assert env._trace == expected  # same jobs as the reader gives
    again, _ = run(env, {"trace": HELIOS, "trace_format": "helios", "trace_seed": 2})
    assert again["episode_metrics"] == info["episode_metrics"]
