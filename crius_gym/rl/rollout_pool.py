"""Vine rollouts in worker processes: each worker holds an env of the same scenario.

A rollout (what an action costs if the guide finishes the episode) is independent of every
other, and most of a vine update's time. :class:`RolloutPool` sends the episode's state
(:meth:`~crius_gym.env.cluster_env.CriusEnv.rollout_state`, a few tens of KB) and the actions to
worker processes, each of which restores the state in an env of its own and answers
:meth:`~crius_gym.env.cluster_env.CriusEnv.rollout_cost`; the answers equal the in-process ones.

The workers are a :class:`concurrent.futures.ProcessPoolExecutor`, not a
``multiprocessing.Pool``: a stop signal sent to the whole process group (Ctrl-C in a terminal,
``kill -- -PGID``, ``pkill -f train_ppo``) kills the workers too, and a ``Pool`` worker killed
while it waits for a task dies holding the task queue's lock, so ``Pool.terminate()`` then
waits for that lock for ever and the trainer hangs after saving its checkpoint. The executor
sees a worker die, marks itself broken and shuts down at once.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import signal
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig

_ENV: CriusEnv | None = None
PARENT_POLL_S = 0.5  # how often a worker checks that its trainer is still alive


def _exit_with(parent_pid: int) -> None:
    """Exit this worker as soon as ``parent_pid`` is no longer its parent.

    A trainer killed with SIGKILL cannot stop its workers, and they would wait for tasks for
    as long as the machine runs (two idle processes of ~335 MB per killed run): a forked
    worker holds the task pipe's write end too, so it never reads end-of-file. When the
    parent dies the worker is re-parented (to init or a subreaper), which this notices.
    """

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os._exit(1)  # no clean-up to do: the worker holds nothing but its env

    threading.Thread(target=watch, name="exit-with-trainer", daemon=True).start()


def _init(scenario: str, config: EnvConfig, parent_pid: int | None = None) -> None:
    # A forked worker inherits the trainer's SIGTERM/SIGINT handlers (save a checkpoint, then
    # stop): with them, Pool.terminate() could not stop a worker waiting on a lock, and the run
    # hung at its end. Workers die on SIGTERM and leave Ctrl-C to the trainer.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if parent_pid is not None:
        _exit_with(parent_pid)
    global _ENV  # one env per worker process, built once
    _ENV = worker_env(scenario, config)


def _cost(task: tuple[dict[str, Any], int]) -> float:
    assert _ENV is not None
    state, action = task
    _ENV.restore_rollout_state(state)
    return _ENV.rollout_cost(action)


_NETWORKS: dict[tuple[str, float | None], Any] = {}


def network_rollouts(path: str, horizon_s: float | None) -> Any:
    """A :class:`~crius_gym.rl.network_rollouts.NetworkRollouts` of a saved policy (memoised)."""
    key = (path, horizon_s)
    if key not in _NETWORKS:
        # Imported here: a worker that rolls out the guide never loads a network.
        import random

        import numpy as np
        import torch
        from sb3_contrib import MaskablePPO

        from crius_gym.rl.network_rollouts import NetworkRollouts

        # SB3's load re-seeds the global generators with the saved model's seed: in a training
        # process that would change what the trainer samples next. Keep them as they were.
        states = random.getstate(), np.random.get_state()  # noqa: NPY002 - SB3 seeds the legacy one
        with torch.random.fork_rng():
            model = MaskablePPO.load(path, device="cpu")
        random.setstate(states[0])
        np.random.set_state(states[1])  # noqa: NPY002
        _NETWORKS[key] = NetworkRollouts(model, horizon_s)
    return _NETWORKS[key]


RolloutTask = tuple[bytes, list[int], bool, str | None, float | None]


def worker_env(scenario: str, config: EnvConfig) -> CriusEnv:
    """A worker's env (one per worker process or actor), with one torch thread.

    A forked child inherits the parent's OpenMP thread pool in a state it cannot use: its first
    parallel torch op (a network rollout's forward pass) waits for threads that do not exist,
    for ever. One thread runs every op inline, outside that pool.
    """
    import torch

    torch.set_num_threads(1)
    env = CriusEnv(scenario, config)
    env.reset(seed=0)
    return env


def rollout_costs(env: CriusEnv, task: RolloutTask) -> list[float]:
    """The costs of one decision's actions from a pickled episode state, in ``env``."""
    blob, actions, future, policy, horizon_s = task
    # rollout_cost works on a copy and leaves the env as it was: one restore serves them all.
    env.restore_rollout_state(pickle.loads(blob))
    if policy is not None:
        return list(network_rollouts(policy, horizon_s).costs(env, actions))
    return [env.rollout_cost(action, future) for action in actions]


def _costs(task: RolloutTask) -> list[float]:
    assert _ENV is not None
    return rollout_costs(_ENV, task)


class RolloutPool:
    """Worker processes answering rollout costs of episodes of one scenario.

    Args:
        scenario: scenario name or file (the workers build their env from it).
        config: the env settings of the episodes.
        processes: worker processes.
    """

    def __init__(self, scenario: str, config: EnvConfig, processes: int) -> None:
        self._pool = ProcessPoolExecutor(
            processes,
            mp_context=mp.get_context("fork"),
            initializer=_init,
            initargs=(scenario, config, os.getpid()),
        )

    def costs(self, tasks: Sequence[tuple[CriusEnv, int]]) -> list[float]:
        """The rollout cost of each (env, action), in order."""
        states: dict[int, dict[str, Any]] = {}
        payload = []
        for env, action in tasks:
            if id(env) not in states:
                states[id(env)] = env.rollout_state()
            payload.append((states[id(env)], action))
        return list(self._pool.map(_cost, payload))

    def submit(
        self,
        env: CriusEnv,
        actions: Sequence[int],
        future: bool = True,
        policy: str | None = None,
        horizon_s: float | None = None,
    ) -> Future[list[float]]:
        """Start the costs of several actions of one decision; ``.result()`` returns them.

        ``future``: as :meth:`CriusEnv.rollout_cost`'s. ``policy``: a saved policy (.zip) that
        decides after each action instead of the guide, over the jobs present, its rollouts
        truncated after ``horizon_s`` (:class:`~crius_gym.rl.network_rollouts.NetworkRollouts`).

        The state is pickled here, not by the executor's feeder thread later: the episode goes
        on at once and would change what a late pickle sees.
        """
        blob = pickle.dumps(env.rollout_state(), protocol=pickle.HIGHEST_PROTOCOL)
        return self._pool.submit(_costs, (blob, list(actions), future, policy, horizon_s))

    def call(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` in a worker (for tests: what a worker's process looks like)."""
        return self._pool.submit(fn, *args).result()

    def close(self) -> None:
        """Stop the workers (pending rollouts are cancelled)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
