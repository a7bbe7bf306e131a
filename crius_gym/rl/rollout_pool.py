"""Vine rollouts in worker processes: each worker holds an env of the same scenario.

A rollout (what an action costs if the guide finishes the episode) is independent of every
other, and most of a vine update's time. :class:`RolloutPool` sends the episode's state
(:meth:`~crius_gym.env.cluster_env.CriusEnv.rollout_state`, a few tens of KB) and the actions to
worker processes, each of which restores the state in an env of its own and answers
:meth:`~crius_gym.env.cluster_env.CriusEnv.rollout_cost`; the answers equal the in-process ones.
"""

from __future__ import annotations

import multiprocessing as mp
import pickle
import signal
from collections.abc import Sequence
from typing import Any

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig

_ENV: CriusEnv | None = None


def _init(scenario: str, config: EnvConfig) -> None:
    # A forked worker inherits the trainer's SIGTERM/SIGINT handlers (save a checkpoint, then
    # stop): with them, Pool.terminate() could not stop a worker waiting on a lock, and the run
    # hung at its end. Workers die on SIGTERM and leave Ctrl-C to the trainer.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    global _ENV  # one env per worker process, built once
    _ENV = CriusEnv(scenario, config)
    _ENV.reset(seed=0)


def _cost(task: tuple[dict[str, Any], int]) -> float:
    assert _ENV is not None
    state, action = task
    _ENV.restore_rollout_state(state)
    return _ENV.rollout_cost(action)


def _costs(task: tuple[bytes, list[int]]) -> list[float]:
    assert _ENV is not None
    blob, actions = task
    # rollout_cost works on a copy and leaves the env as it was: one restore serves them all.
    _ENV.restore_rollout_state(pickle.loads(blob))
    return [_ENV.rollout_cost(action) for action in actions]


class RolloutPool:
    """Worker processes answering rollout costs of episodes of one scenario.

    Args:
        scenario: scenario name or file (the workers build their env from it).
        config: the env settings of the episodes.
        processes: worker processes.
    """

    def __init__(self, scenario: str, config: EnvConfig, processes: int) -> None:
        ctx = mp.get_context("fork")
        self._pool = ctx.Pool(processes, initializer=_init, initargs=(scenario, config))

    def costs(self, tasks: Sequence[tuple[CriusEnv, int]]) -> list[float]:
        """The rollout cost of each (env, action), in order."""
        states: dict[int, dict[str, Any]] = {}
        payload = []
        for env, action in tasks:
            if id(env) not in states:
                states[id(env)] = env.rollout_state()
            payload.append((states[id(env)], action))
        return list(self._pool.map(_cost, payload, chunksize=1))

    def submit(self, env: CriusEnv, actions: Sequence[int]) -> Any:
        """Start the costs of several actions of one decision; ``.get()`` returns them.

        The state is pickled here, not by the pool's feeder thread later: the episode goes on
        at once and would change what a late pickle sees.
        """
        blob = pickle.dumps(env.rollout_state(), protocol=pickle.HIGHEST_PROTOCOL)
        return self._pool.apply_async(_costs, ((blob, list(actions)),))

    def close(self) -> None:
        """Stop the workers."""
        self._pool.terminate()
        self._pool.join()
