"""Property tests (hypothesis) of the simulator and the env over random traces (issue 14):
every job accounted for, late rejections included; no over-allocation; simulated time never goes
back; a deep-copied or pickled env mid-episode continues exactly as the original."""

import copy
import pickle

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.policies.registry import make_policy
from tests.sim.test_properties import SIM, build, jobs_strategy

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("policy", ["fcfs", "crius"])
@SETTINGS
@given(raw=jobs_strategy)
def test_jobs_are_conserved_including_late_rejections(policy, raw):
    trace = build(raw)
    res = SIM.run(trace, make_policy(policy), seed=0)
    s = res.summary
    assert s.arrived == s.jobs == len(trace)
    assert s.finished + s.rejected + s.unfinished == s.jobs and s.unfinished == 0
    assert s.makespan_s >= max(j.arrival_s for j in trace.jobs) - 1e-9
    assert sum(res.rejections.values()) == s.rejected


def play(env, rng, steps):
    """Take ``steps`` random valid actions; the observations, rewards and ends seen."""
    out = []
    for _ in range(steps):
        mask = env.action_masks()
        valid = np.flatnonzero(mask)
        a = int(rng.choice(valid)) if len(valid) else env.config.num_actions - 1
        obs, r, term, trunc, _ = env.step(a)
        out.append((a, r, term, trunc, {k: v.tobytes() for k, v in obs.items()}))
        alloc = env.sim.allocator
        assert 0 <= alloc.busy_gpus() <= env.sim.cluster.num_gpus
        if term or trunc:
            break
    return out


@SETTINGS
@given(seed=st.integers(0, 10_000), before=st.integers(0, 25), after=st.integers(1, 25))
def test_copied_and_pickled_env_continue_identically(seed, before, after):
    env = CriusEnv("tiny")
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    first = play(env, rng, before)
    if first and (first[-1][2] or first[-1][3]):
        return  # the episode ended before the copy
    state = rng.bit_generator.state
    copies = [copy.deepcopy(env), pickle.loads(pickle.dumps(env))]
    runs = []
    for e in [env, *copies]:
        r = np.random.default_rng()
        r.bit_generator.state = state
        runs.append(play(e, r, after))
    assert runs[0] == runs[1] == runs[2]


@SETTINGS
@given(seed=st.integers(0, 10_000))
def test_env_time_is_monotone_and_episode_accounts_for_every_job(seed):
    env = CriusEnv("tiny")
    env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    last = -1.0
    for _ in range(2_000):
        valid = np.flatnonzero(env.action_masks())
        _, _, term, trunc, info = env.step(int(rng.choice(valid)))
        assert info["sim_time_s"] >= last
        last = info["sim_time_s"]
        if term or trunc:
            break
    assert term
    assert info["finished"] + info["rejected"] == info["jobs"] == info["arrived"]
