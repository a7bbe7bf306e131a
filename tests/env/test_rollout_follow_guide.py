"""A rollout's fast guide-following loop runs exactly the episode the env itself would run.

``CriusEnv.rollout_cost`` finishes a headless copy with ``_follow_guide``, which asks
``express_next`` for the proposal's env action instead of building every decision's full state.
The reference here is the plain loop through the public API: a deep copy of the env stepped with
``guide_action()`` until it ends. Settings that make the guide's proposals fall outside the
env's actions (a small window, few Cells, no running-job block, another Cell selection)
exercise the drops; ``stop_at_every_event`` and the throughput reward change how the env stops.
An env whose tuning mode differs from the guide's can take none of its Starts: an error.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.decision import build_decision_state, express_next
from crius_gym.sim.actions import Preempt, Reconfigure, Start


def _reference_cost(env: CriusEnv, action: int) -> float:
    twin = copy.deepcopy(env)
    a = action
    while True:
        _, _, term, trunc, _ = twin.step(a)
        if term or trunc:
            break
        proposal = twin.guide_action()
        a = twin.config.num_actions - 1 if proposal is None else proposal
    result = twin.episode_result()
    assert result is not None
    return sum(
        (j.finish_s if j.status == "finished" else result.summary.makespan_s) - j.arrival_s
        for j in result.jobs
        if j.status != "rejected" and j.arrival_s <= result.summary.makespan_s
    )


SETTINGS = [
    ("tiny", {}),
    ("tiny", {"window_jobs": 1, "cells_per_job": 1, "head_jobs": 1, "running_jobs": 1}),
    ("hetero-64", {"episode_jobs": 24}),
    ("hetero-64", {"episode_jobs": 24, "window_jobs": 2, "cells_per_job": 2, "head_jobs": 0}),
    ("hetero-64", {"episode_jobs": 24, "reconfigure": False}),
    ("hetero-64", {"episode_jobs": 24, "cell_selection": "fastest"}),
    ("hetero-64", {"episode_jobs": 24, "stop_at_every_event": True, "reward": "throughput"}),
]


@pytest.mark.parametrize(("scenario", "overrides"), SETTINGS)
def test_rollout_costs_equal_stepping_the_env_with_the_guide(scenario, overrides):
    env = CriusEnv(scenario, {"max_decisions": 10**12, **overrides})
    rng = np.random.default_rng(0)
    checked = 0
    for episode in range(2):
        env.reset(options={"split": "train", "index": episode})
        for step in range(40):
            valid = np.flatnonzero(env.action_masks())
            if step % 9 == 0:  # a few decisions, every valid action of each
                for a in valid:
                    assert env.rollout_cost(int(a)) == _reference_cost(env, int(a))
                    checked += 1
            # Mostly the guide, sometimes not: the episode leaves the guide's own run.
            a = env.guide_action() if rng.random() < 0.7 else int(rng.choice(valid))
            _, _, term, trunc, _ = env.step(a)
            if term or trunc:
                break
    assert checked > 10


def test_a_guide_the_env_cannot_follow_ends_on_its_fallback_not_a_hang():
    """The env pays full tuning, the guide plans pruned Starts: none is an env action.

    Once nothing is left to wait for, the guide's WAIT becomes the first valid action (counted
    as a stall), so following the guide ends, in the rollout as in the env.
    """
    env = CriusEnv("tiny", {"tuning": "full", "max_decisions": 10**12})
    env.reset(options={"split": "train", "index": 0})
    wait = env.config.num_actions - 1
    assert env.rollout_cost(wait) == _reference_cost(env, wait)
    twin = copy.deepcopy(env)
    stalls = 0
    while True:
        _, _, term, trunc, info = twin.step(twin.guide_action())
        stalls = info["guide_stalls"]
        if term or trunc:
            break
    assert stalls > 0 and info["finished"] + info.get("rejected", 0) == len(twin.sim.records)


def test_the_guide_plans_without_a_job_preempted_at_this_instant():
    """A job the agent preempted cannot restart until time moves, so the guide's plan leaves it
    out (it would otherwise plan its restart, have it dropped, and could be left with nothing
    to do while other jobs could start: a stall)."""
    env = CriusEnv("hetero-64", {"episode_jobs": 24, "max_decisions": 10**12})
    cfg = env.config
    preempts = checked = 0
    for episode in range(3):
        env.reset(options={"split": "train", "index": episode})
        while True:
            valid = np.flatnonzero(env.action_masks())
            pre = [
                int(a)
                for a in valid
                if a >= cfg.start_actions
                and a < cfg.start_actions + cfg.running_actions
                and (a - cfg.start_actions) % (cfg.cells_per_job + 1) == cfg.cells_per_job
            ]
            if pre and preempts < 6:
                preempts += 1
                _, _, term, trunc, _ = env.step(pre[0])
                held = set(env._held())
                assert held
                plan = env.guide.plan(env.sim, env._held())
                assert not held & set(plan.starts)
                checked += 1
            else:
                _, _, term, trunc, _ = env.step(env.guide_action())
            if term or trunc:
                break
    assert checked > 0


def test_express_next_agrees_with_the_full_decision_state():
    """For every suffix of the guide's plan (later actions are often not valid yet) and more."""
    env = CriusEnv(
        "hetero-64", {"episode_jobs": 30, "window_jobs": 3, "cells_per_job": 2, "head_jobs": 1}
    )
    rng = np.random.default_rng(1)
    compared = missing = 0
    for episode in range(3):
        env.reset(options={"split": "train", "index": episode})
        for _ in range(150):
            sim, cfg, guide = env.sim, env.config, env.guide
            assert guide is not None
            acted = env._changes.blocked()
            actions = guide.plan(sim).actions
            suffixes = [actions[k:] for k in range(len(actions))]
            # Proposals the guide does not make: a move to the Cell a job is on, a preemption,
            # a start on each of a waiting job's tuner Cells, a waiting job's preemption.
            for i in sim.active_indices[:2]:
                rec = sim.records[i]
                suffixes += [[Reconfigure(rec.job.job_id, rec.cell)], [Preempt(rec.job.job_id)]]
            for i in sim.waiting_indices[:1]:
                job = sim.records[i].job
                ranked = env.tuner.tune(job.model, job.global_batch).candidates
                suffixes += [[Start(job.job_id, ce.cell)] for ce in ranked[:4]]
                suffixes += [[Preempt(job.job_id)]]  # not running: not shown
            saved = env._state
            for suffix in suffixes:
                plan = guide._index(suffix)
                env._state = build_decision_state(sim, cfg, env.selector, acted, plan)
                index = env._index_in(env._state, suffix[0])
                want = None if index is None else env._decode(index)
                got = express_next(sim, cfg, env.selector, acted, plan)
                assert got == want
                if isinstance(want, Start | Reconfigure):  # the Cell object the env decodes
                    assert isinstance(got, Start | Reconfigure) and got.cell is want.cell
                compared += 1
                missing += want is None
            env._state = saved
            valid = np.flatnonzero(env.action_masks())
            a = env.guide_action() if rng.random() < 0.8 else int(rng.choice(valid))
            _, _, term, trunc, _ = env.step(a)
            if term or trunc:
                break
    assert compared > 100 and missing > 5
