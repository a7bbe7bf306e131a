"""Warmed-up training episodes: the guide schedules the first jobs, the agent takes over."""

from __future__ import annotations

import numpy as np
import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.errors import ConfigError


def _follow_guide(env: CriusEnv) -> dict[str, float]:
    """Step the guide's proposals to the end; the finish time of every job."""
    done = False
    while not done:
        proposal = env.guide_action()
        a = env.config.num_actions - 1 if proposal is None else proposal
        _, _, term, trunc, _ = env.step(a)
        done = term or trunc
    result = env.episode_result()
    assert result is not None
    return {j.job_id: j.finish_s for j in result.jobs}


def test_a_warmed_up_episode_starts_at_the_hand_over_with_the_warm_up_jobs_in_the_system():
    env = CriusEnv("hetero-64", EnvConfig(episode_jobs=10, warmup_jobs=30))
    _, info = env.reset(seed=3)
    trace = env.trace
    assert trace is not None
    assert len(trace.jobs) == 40
    assert env.sim.now_s >= trace.jobs[30].arrival_s
    assert info["running"] > 0  # a cluster in mid-run, not an empty one
    assert info["decisions"] == 0 and info["guide_proposals"] == 0


def test_following_the_guide_after_the_hand_over_is_the_guides_run_of_the_whole_trace():
    warm = CriusEnv("hetero-64", EnvConfig(episode_jobs=10, warmup_jobs=30))
    warm.reset(seed=5)
    trace = warm.trace
    assert trace is not None
    warm_finish = _follow_guide(warm)
    cold = CriusEnv("hetero-64", EnvConfig(episode_jobs=10))
    cold.reset(options={"trace": trace})
    assert warm_finish == _follow_guide(cold)


def test_warm_up_is_deterministic_and_leaves_held_out_traces_alone():
    cfg = EnvConfig(episode_jobs=10, warmup_jobs=20)
    a, b = CriusEnv("mix", cfg), CriusEnv("mix", cfg)
    for seed in (0, 1):
        oa, _ = a.reset(seed=seed)
        ob, _ = b.reset(seed=seed)
        assert all(np.array_equal(oa[k], ob[k]) for k in oa)
    plain = CriusEnv("mix", EnvConfig(episode_jobs=10))
    ov, _ = a.reset(options={"split": "val", "index": 0})
    op, _ = plain.reset(options={"split": "val", "index": 0})
    assert all(np.array_equal(ov[k], op[k]) for k in ov)
    assert a.sim.now_s == plain.sim.now_s


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"warmup_jobs": -1}, "warmup_jobs must be >= 0"),
        ({"warmup_jobs": 5, "guide": None}, "needs a guide"),
    ],
)
def test_warm_up_config_is_checked(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        EnvConfig(**kwargs)


def test_warmup_noise_is_validated():
    with pytest.raises(ConfigError, match="warmup_noise must be in"):
        EnvConfig(warmup_jobs=10, warmup_noise=1.5)
    with pytest.raises(ConfigError, match="warmup_noise must be in"):
        EnvConfig(warmup_jobs=10, warmup_noise=float("nan"))
    with pytest.raises(ConfigError, match="needs warmup_jobs"):
        EnvConfig(warmup_noise=0.5)


def test_warmup_noise_builds_a_queue_and_is_seeded():
    """Noisy warm-ups wait where the guide starts jobs, so more jobs wait at the hand-over than
    after the guide's own warm-up; the same seed gives the same state."""

    def waiting(noise: float, seed: int) -> int:
        env = CriusEnv("hetero-64", EnvConfig(episode_jobs=10, warmup_jobs=60, warmup_noise=noise))
        env.reset(seed=seed)
        return len(env.sim.waiting_indices)

    plain = [waiting(0.0, s) for s in range(4)]
    noisy = [waiting(1.0, s) for s in range(4)]
    assert sum(noisy) > sum(plain)
    assert noisy == [waiting(1.0, s) for s in range(4)]
