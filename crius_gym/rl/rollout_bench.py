"""Throughput of the vine's rollouts on each backend (``benchmark.py --sections rollouts``).

The trainer side is what a training run does at a labelled decision: it steps training episodes
of a scenario (the guide deciding), and at each decision submits the vine's actions
(:func:`~crius_gym.rl.sequence_ppo._vine_actions`: the guide's, WAIT, the job's other Cells and
three random ones) to the pool, which costs them while the episodes go on. Every decision is
labelled here (a run labels a share ``vine_fraction``), so the workers are the bottleneck and
the measure is theirs: decisions labelled per second, from the first submission to the last
answer. ``workers`` 0 costs the actions in the trainer's process, as ``rollout_workers: 0``.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.rl.sequence_ppo import _vine_actions


def rollout_throughput(
    scenario: str, config: EnvConfig, backend: str, workers: int, decisions: int, seed: int = 0
) -> dict[str, Any]:
    """Label ``decisions`` decisions of training episodes with ``workers`` workers.

    Args:
        scenario: training scenario (name or file).
        config: the env settings of its episodes.
        backend: ``process`` or ``ray`` (a private local instance).
        workers: worker processes or actors (0: in this process).
        decisions: decisions to label.
        seed: seeds the episodes and the random extra actions.

    Returns:
        ``startup_s`` (pool start, Ray's included), ``seconds``, ``labels_per_s``,
        ``rollouts_per_s`` and ``ms_per_label`` (wall time per labelled decision).
    """
    rng = np.random.default_rng(seed)
    env = CriusEnv(scenario, config)
    t0 = time.perf_counter()
    pool: Any = None
    if workers and backend == "ray":
        from crius_gym.rl.ray_rollouts import RayRolloutPool

        pool = RayRolloutPool(scenario, config, workers)
    elif workers:
        from crius_gym.rl.rollout_pool import RolloutPool

        pool = RolloutPool(scenario, config, workers)
    startup_s = time.perf_counter() - t0
    if pool is not None:  # the workers build their envs; wait for that before timing
        env.reset(options={"split": "train", "index": 0})
        first = env.guide_action()
        assert first is not None  # the env has a guide (the scenario's, else Crius)
        pool.submit(env, [first]).result()
    episode = 0
    env.reset(options={"split": "train", "index": episode})
    pending: list[Any] = []
    rollouts = 0
    t0 = time.perf_counter()
    for _ in range(decisions):
        mask = np.asarray(env.action_masks())
        guide = env.guide_action()
        assert guide is not None  # the env has a guide (the scenario's, else Crius)
        acts = _vine_actions(env.config, mask, guide, guide, 3, rng)
        rollouts += len(acts)
        if pool is None:
            pending.append([env.rollout_cost(a) for a in acts])
        else:
            pending.append(pool.submit(env, acts))
        _, _, term, trunc, _ = env.step(guide)
        if term or trunc:
            episode += 1
            env.reset(options={"split": "train", "index": episode})
    for p in pending:
        if hasattr(p, "result"):
            p.result()
    seconds = time.perf_counter() - t0
    if pool is not None:
        pool.close()
    return {
        "startup_s": startup_s,
        "seconds": seconds,
        "labels_per_s": decisions / seconds,
        "rollouts_per_s": rollouts / seconds,
        "ms_per_label": 1000 * seconds / decisions,
    }
