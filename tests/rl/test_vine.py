"""Vine advantages: exact rollout costs under the guide, the actions evaluated, distillation."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.policies.registry import make_policy
from crius_gym.rl.ppo import make_model, resolve_hyperparams
from crius_gym.rl.sequence_ppo import SequencePPO, _vine_actions
from crius_gym.rl.train import build_vec_env
from crius_gym.scenarios import load_scenario


def test_rollout_cost_of_the_guides_action_is_the_guides_run():
    sc = load_scenario("tiny")
    env = CriusEnv(sc, {"max_decisions": 10**12})
    trace = sc.synthetic_trace("test", 0, tuner=env.tuner)
    env.reset(options={"trace": trace})
    crius = sc.make_simulator(env.tuner).run(trace, make_policy("crius"))
    total = sum(j.jct_s for j in crius.jobs if j.status == "finished")
    assert env.rollout_cost(env.guide_action()) == pytest.approx(total, rel=1e-9)


def test_rollout_cost_leaves_the_episode_untouched_and_ranks_actions():
    sc = load_scenario("tiny")
    env = CriusEnv(sc, {"max_decisions": 10**12})
    trace = sc.synthetic_trace("test", 1, tuner=env.tuner)
    env.reset(options={"trace": trace})
    for _ in range(5):
        env.step(env.guide_action())
    before = (env.sim.now_s, env.action_masks().copy(), env.guide_action())
    valid = np.flatnonzero(env.action_masks())
    costs = {int(a): env.rollout_cost(int(a)) for a in valid}
    assert (env.sim.now_s, env.guide_action()) == (before[0], before[2])
    assert np.array_equal(env.action_masks(), before[1])
    # Following the guide from here costs what the rest of this episode costs if we do it.
    g = env.guide_action()
    while True:
        _, _, term, trunc, _ = env.step(env.guide_action())
        if term or trunc:
            break
    res = env.episode_result()
    total = sum(j.jct_s for j in res.jobs if j.status == "finished")
    assert costs[g] == pytest.approx(total, rel=1e-9)
    assert len(set(costs.values())) > 1  # actions differ in what they cost


def test_vine_actions_hold_guide_taken_wait_and_the_guides_job_on_other_cells():
    cfg = EnvConfig()
    mask = np.zeros(cfg.num_actions, dtype=bool)
    c = cfg.cells_per_job
    mask[[c + 0, c + 2, c + 3, 5, cfg.num_actions - 1]] = True  # job 1: cells 0, 2, 3
    out = _vine_actions(cfg, mask, guide=c + 2, taken=5, extra=0, rng=np.random.default_rng(0))
    assert out[:3] == [c + 2, 5, cfg.num_actions - 1]
    assert set(out) == {c + 2, 5, cfg.num_actions - 1, c, c + 3}


def test_vine_training_fills_a_replay_and_saves_without_it(tmp_path):
    hp = resolve_hyperparams("tiny", overrides=["vine_fraction=0.5"])
    venv = build_vec_env(hp, "tiny", EnvConfig(**dict(hp.env)), 0)
    model = make_model(hp, venv, 0, None)
    model.learn(512)  # two phases: the first phase's rollouts label the second update
    assert len(model._replay) > 0 and model.distill_stats
    model.save(tmp_path / "m.zip")
    loaded = SequencePPO.load(tmp_path / "m.zip", device="cpu")
    assert len(loaded._replay) == 0 and loaded.vine_fraction == 0.5


def _vine_model(workers: int):
    hp = resolve_hyperparams(
        "tiny",
        overrides=["vine_fraction=0.5", "n_steps=16", f"rollout_workers={workers}", "n_envs=2"],
    )
    venv = build_vec_env(hp, "tiny", EnvConfig(**dict(hp.env)), 0)
    return make_model(hp, venv, 0, None)


def test_vine_phases_are_fixed_length_and_episodes_go_on_across_updates():
    model = _vine_model(0)
    model.learn(32)  # one phase: 2 envs x 16 decisions
    assert model.num_timesteps == 32
    assert len(model._replay) == 0  # its rollouts are used at the next update (a lag of one)
    pending = len(model._vine_pending)
    assert pending > 0
    envs = [e.unwrapped for e in model.get_env().envs]
    before = [(e.trace, e.sim.now_s, e.sim.decisions) for e in envs]
    model.learn(1, reset_num_timesteps=False)  # one more phase
    assert model.num_timesteps == 64
    assert len(model._replay) == pending  # last phase's evaluated decisions, labelled
    # The update restarted no episode: an env still on its trace has gone on from where it was.
    going_on = [
        e.sim.decisions > d
        for e, (trace, _, d) in zip(envs, before, strict=True)
        if e.trace is trace
    ]
    assert going_on and all(going_on)


def test_vine_training_does_not_depend_on_the_rollout_workers():
    """Same seed, same run: the fixed lag makes the labels independent of worker speed."""
    runs = []
    for workers in (0, 1):
        model = _vine_model(workers)
        model.learn(96)
        model.close_pool()
        labels = model.replay.batch(np.arange(len(model.replay)))[2]
        weights = torch.cat([p.detach().flatten() for p in model.policy.parameters()])
        runs.append((labels, weights))
    assert np.array_equal(runs[0][0], runs[1][0])
    assert torch.equal(runs[0][1], runs[1][1])


def _pool_decision() -> tuple[EnvConfig, CriusEnv, list[int]]:
    """A tiny episode three decisions in, and its valid actions."""
    cfg = EnvConfig(episode_jobs=10)
    env = CriusEnv("tiny", cfg)
    env.reset(options={"split": "train", "index": 3})
    for _ in range(3):
        env.step(env.guide_action())
    return cfg, env, [int(a) for a in np.flatnonzero(env.action_masks())]


def test_rollout_workers_answer_as_this_process_does():
    from crius_gym.rl.rollout_pool import RolloutPool

    cfg, env, actions = _pool_decision()
    pool = RolloutPool("tiny", cfg, 1)
    try:
        assert pool.costs([(env, a) for a in actions]) == [env.rollout_cost(a) for a in actions]
    finally:
        pool.close()


def test_rollout_workers_drop_the_trainers_signal_handlers():
    """A worker that kept train_ppo's SIGTERM handler could not be terminated: the run hung."""
    import signal

    from crius_gym.rl.rollout_pool import RolloutPool

    previous = signal.signal(signal.SIGTERM, lambda *_: None)  # as train_ppo installs one
    try:
        pool = RolloutPool("tiny", EnvConfig(episode_jobs=10), 1)
        try:
            handlers = (
                pool.call(signal.getsignal, signal.SIGTERM),
                pool.call(signal.getsignal, signal.SIGINT),
            )
        finally:
            pool.close()
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert handlers == (signal.SIG_DFL, signal.SIG_IGN)


def test_rollout_pool_closes_after_its_workers_were_killed():
    """A stop signal to the process group kills the workers too: closing must not hang.

    (A ``multiprocessing.Pool`` worker killed while waiting for a task dies holding the task
    queue's lock, and ``Pool.terminate()`` waits for it for ever; the trainer hung after saving
    its checkpoint.) Run in a fresh interpreter, whose only children are the pool's workers.
    """
    import subprocess
    import sys

    script = """
import multiprocessing as mp, os, signal
from crius_gym.env.config import EnvConfig
from crius_gym.rl.rollout_pool import RolloutPool
pool = RolloutPool("tiny", EnvConfig(episode_jobs=10), 2)
pool.call(os.getpid)
for child in mp.active_children():
    os.kill(child.pid, signal.SIGTERM)
pool.close()
print("closed")
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "closed"


def _at_decision(sc, trace, steps):
    env = CriusEnv(sc, {"max_decisions": 10**12})
    env.reset(options={"trace": trace})
    for _ in range(steps):
        env.step(env.guide_action())
    return env


def test_present_rollout_costs_do_not_read_the_future():
    """Labels from rollouts over the jobs present: the same whatever arrives later."""
    import dataclasses

    sc = load_scenario("tiny")
    env = _at_decision(sc, sc.synthetic_trace("test", 1, tuner=CriusEnv(sc).tuner), 6)
    now = env.sim.now_s
    trace = env.trace
    arrived = [j for j in trace.jobs if j.arrival_s <= now]
    assert len(arrived) < len(trace.jobs), "the decision must have arrivals still to come"
    # The same past, a different future: later jobs dropped.
    other = _at_decision(sc, dataclasses.replace(trace, jobs=tuple(arrived)), 6)
    assert other.sim.now_s == now
    assert np.array_equal(other.action_masks(), env.action_masks())
    valid = [int(a) for a in np.flatnonzero(env.action_masks())]
    present = [env.rollout_cost(a, future=False) for a in valid]
    assert present == [other.rollout_cost(a, future=False) for a in valid]
    # Hindsight costs do read it, and count the jobs still to come.
    assert env.rollout_cost(valid[0]) > present[0]


def test_present_rollout_workers_answer_as_this_process_does():
    from crius_gym.rl.rollout_pool import RolloutPool

    cfg, env, actions = _pool_decision()
    pool = RolloutPool("tiny", cfg, 1)
    try:
        got = pool.submit(env, actions, future=False).result()
        assert got == [env.rollout_cost(a, future=False) for a in actions]
    finally:
        pool.close()
