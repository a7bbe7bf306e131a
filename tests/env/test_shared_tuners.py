"""Envs of one scenario may share their tuners (one per mixture component): same episodes."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.errors import ConfigError
from crius_gym.scenarios import load_scenario

CFG = {"episode_jobs": 12}


def _digest(env: CriusEnv, seed: int, steps: int) -> str:
    h = hashlib.sha256()
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    for k in range(steps):
        mask = env.action_masks()
        a = env.guide_action() if k % 3 else int(rng.choice(np.flatnonzero(mask)))
        obs, r, term, trunc, _ = env.step(a)
        h.update(b"".join(np.ascontiguousarray(v).tobytes() for v in obs.values()))
        h.update(repr(r).encode())
        if term or trunc:
            obs, _ = env.reset()
    return h.hexdigest()


def test_envs_sharing_tuners_run_the_episodes_of_envs_with_their_own():
    first = CriusEnv("mix", CFG)
    second = CriusEnv("mix", CFG, tuners=first.tuners)
    assert all(a is b for a, b in zip(first.tuners, second.tuners, strict=True))
    # The first env warms the shared caches; the second meets them warm (and in another order).
    shared = [_digest(first, 0, 150), _digest(second, 1, 150)]
    alone = [_digest(CriusEnv("mix", CFG), 0, 150), _digest(CriusEnv("mix", CFG), 1, 150)]
    assert shared == alone


def test_tuners_must_match_the_components():
    env = CriusEnv("mix", CFG)
    with pytest.raises(ConfigError, match="one per component"):
        CriusEnv("mix", CFG, tuners=env.tuners[:-1])
    other = load_scenario("hetero-64").make_tuner()
    single = CriusEnv("crius-testbed", CFG)
    assert len(single.tuners) == 1
    with pytest.raises(ConfigError, match="not with tuner"):
        CriusEnv("crius-testbed", CFG, tuner=single.tuners[0], tuners=single.tuners)
    with pytest.raises(ConfigError, match="another cluster"):
        CriusEnv("crius-testbed", CFG, tuners=[other])
