"""Vine rollouts on Ray (issue 36, item 1): the actors answer as this process does, a killed
actor's rollouts run again elsewhere with the same answer, and a training run with the Ray
backend ends with the process backend's weights."""

from __future__ import annotations

import numpy as np
import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from tests.experiments.test_rl_scripts import TINY, run
from tests.rl.test_exact_resume import weights

ray = pytest.importorskip("ray")

pytestmark = pytest.mark.ray


def _decisions(count: int) -> list[tuple[CriusEnv, list[int]]]:
    """Envs at ``count`` different decisions of a tiny episode, with their valid actions."""
    cfg = EnvConfig(episode_jobs=10)
    out = []
    for k in range(count):
        env = CriusEnv("tiny", cfg)
        env.reset(options={"split": "train", "index": 3 + k})
        for _ in range(2):
            env.step(env.guide_action())
        out.append((env, [int(a) for a in np.flatnonzero(env.action_masks())]))
    return out


def test_actors_answer_as_this_process_and_survive_a_killed_actor():
    from crius_gym.rl.ray_rollouts import RayRolloutPool

    decisions = _decisions(4)
    logged: list[str] = []
    pool = RayRolloutPool("tiny", EnvConfig(episode_jobs=10), 2, log=logged.append)
    try:
        first = [pool.submit(env, acts, future=False) for env, acts in decisions]
        want = [[env.rollout_cost(a, future=False) for a in acts] for env, acts in decisions]
        assert [c.result() for c in first] == want
        # Kill one actor with rollouts queued on it: they run again on its replacement. Those
        # queued may finish before the kill lands (tiny rollouts are quick), so two more are
        # sent to the dead actor after it: a retry is certain, not a race.
        queued = [pool.submit(env, acts, future=False) for env, acts in decisions]
        ray.kill(pool.actor(0), no_restart=True)
        late = [pool.submit(env, acts, future=False) for env, acts in decisions]
        assert [c.result() for c in queued] == want
        assert [c.result() for c in late] == want
        assert pool.retries >= 1
        assert any("died" in line for line in logged)
    finally:
        pool.close()


def test_training_with_the_ray_backend_gives_the_process_backends_weights(tmp_path):
    for name, backend in (("process", "process"), ("ray", "ray")):
        res = run(
            "experiments/train_ppo.py",
            *TINY,
            "--set",
            "rollout_workers=2",
            "--out",
            str(tmp_path),
            "--run-name",
            name,
            "--rollout-backend",
            backend,
        )
        assert res.returncode == 0, res.stderr
        assert ("vine rollouts on Ray: 2 actors" in res.stdout) == (backend == "ray")
    policies = tmp_path / "policies"
    assert weights(policies / "ray" / "model.zip") == weights(policies / "process" / "model.zip")


def test_address_needs_the_ray_backend():
    res = run("experiments/train_ppo.py", "--address", "127.0.0.1:6379", "--scenario", "tiny")
    assert res.returncode == 2 and "--address needs --rollout-backend ray" in res.stderr
