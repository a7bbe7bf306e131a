"""Mid-trace starts (reset option start_s, random warm-ups) and scale-free observations."""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.errors import ConfigError


def _same_obs(a: dict[str, np.ndarray], b: dict[str, np.ndarray], skip: tuple[str, ...] = ()):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a if k not in skip)


def test_a_mid_trace_start_is_the_state_a_replay_of_the_guide_reaches():
    env = CriusEnv("hetero-64", {"max_decisions": 10**12})
    env.reset(options={"split": "val", "index": 1})
    trace = env.trace
    start_s = trace.jobs[60].arrival_s
    mid = CriusEnv("hetero-64", {"max_decisions": 10**12})
    obs_mid, info = mid.reset(options={"trace": trace, "start_s": start_s})
    # The same trace replayed by stepping the guide's proposals until that time.
    obs = env.reset(options={"trace": trace})[0]
    while env.sim.now_s < start_s:
        proposal = env.guide_action()
        obs = env.step(env.config.num_actions - 1 if proposal is None else proposal)[0]
    assert mid.sim.now_s == env.sim.now_s >= start_s
    assert pickle.dumps(mid.sim.state()) == pickle.dumps(env.sim.state())
    # Same state, same observation (but the count of decisions taken at this instant).
    assert _same_obs(obs_mid, obs, skip=("globals",))
    assert info["decisions"] == 0 and info["running"] > 0
    # The episode's return counts from the hand-over only.
    assert mid.step(mid.guide_action())[1] <= 0.0


def test_random_warm_ups_take_over_at_different_points_and_repeat_with_the_seed():
    cfg = EnvConfig(episode_jobs=10, warmup_jobs=40, warmup_random=True)
    a, b = CriusEnv("hetero-64", cfg), CriusEnv("hetero-64", cfg)
    lengths = set()
    for seed in range(6):
        oa, _ = a.reset(seed=seed)
        ob, _ = b.reset(seed=seed)
        assert _same_obs(oa, ob) and a.sim.now_s == b.sim.now_s
        lengths.add(len(a.trace.jobs))
    assert len(lengths) > 2  # the warm-up length is drawn per episode
    assert all(10 <= n <= 50 for n in lengths)


def test_scale_free_observations_do_not_read_the_future_or_the_reward_scale():
    cfg = EnvConfig(scale_free=True, max_decisions=10**12)
    env = CriusEnv("hetero-64", cfg)
    env.reset(options={"split": "val", "index": 0})
    trace = env.trace
    start_s = trace.jobs[40].arrival_s
    obs = env.reset(options={"trace": trace, "start_s": start_s})[0]
    # Another future (the jobs still to come dropped), the same present: the same observation.
    now = env.sim.now_s
    past = dataclasses.replace(trace, jobs=tuple(j for j in trace.jobs if j.arrival_s <= now))
    assert len(past.jobs) < len(trace.jobs)
    other = CriusEnv("hetero-64", cfg).reset(options={"trace": past, "start_s": start_s})[0]
    assert _same_obs(obs, other)
    # Durations on a fixed scale: another reward scale changes only the time-scale feature.
    rescaled = CriusEnv("hetero-64", dataclasses.replace(cfg, reward_scale_s=1234.0))
    obs2 = rescaled.reset(options={"trace": trace, "start_s": start_s})[0]
    assert _same_obs(obs, obs2, skip=("globals",))
    # The v3 features do read the future (the count of arrivals still to come).
    v3 = CriusEnv("hetero-64", {"max_decisions": 10**12})
    a = v3.reset(options={"trace": trace, "start_s": start_s})[0]
    b = CriusEnv("hetero-64", {"max_decisions": 10**12}).reset(
        options={"trace": past, "start_s": start_s}
    )[0]
    assert not np.array_equal(a["globals"], b["globals"])


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"start_s": -1.0}, "start_s must be >= 0"),
        ({"start_s": "soon"}, "start_s must be a number"),
        ({"start_s": True}, "start_s must be a number"),
    ],
)
def test_start_s_is_checked(options, message):
    with pytest.raises(ConfigError, match=message):
        CriusEnv("tiny").reset(options=options)


def test_start_s_needs_a_guide_and_warmup_random_a_warm_up():
    with pytest.raises(ConfigError, match="start_s needs a guide"):
        CriusEnv("tiny", {"guide": None}).reset(options={"start_s": 10.0})
    with pytest.raises(ConfigError, match="warmup_random needs warmup_jobs"):
        EnvConfig(warmup_random=True)
