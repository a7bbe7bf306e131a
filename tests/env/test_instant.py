"""Changes per job and instant: the bookkeeping, and the env's ``changes_per_instant``."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.env.instant import InstantChanges
from crius_gym.errors import ConfigError
from crius_gym.scenarios import load_scenario


def test_a_job_is_blocked_once_it_reaches_the_limit_and_free_when_time_moves() -> None:
    ch = InstantChanges(limit=2)
    ch.start(10.0)
    ch.add(3)
    assert ch.blocked() == frozenset() and ch.changed() == [3]
    ch.add(3)
    assert ch.blocked() == {3}
    ch.start(10.0)  # the same instant: remembered
    assert ch.blocked() == {3}
    ch.start(11.0)
    assert ch.blocked() == frozenset() and ch.changed() == []


def test_copies_are_independent() -> None:
    ch = InstantChanges(limit=1)
    ch.start(0.0)
    for other in (ch.copy(), copy.copy(ch)):
        other.add(1)
        assert 1 in other.blocked() and 1 not in ch.blocked()


def test_a_limit_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="limit"):
        InstantChanges(0)
    with pytest.raises(ConfigError, match="changes_per_instant"):
        EnvConfig(changes_per_instant=0)


def _changed_job_rows_with_a_choice(limit: int, seed: int) -> tuple[int, int]:
    """(states where a running job changed at this instant is shown, those where its row
    offers an action), over a random episode of ``tiny``."""
    env = CriusEnv(load_scenario("tiny"), EnvConfig(changes_per_instant=limit))
    rng = np.random.default_rng(seed)
    env.reset(seed=seed)
    shown = offered = 0
    c = env.config.cells_per_job
    while True:
        st = env._state
        assert st is not None
        changed = set(env._changes.changed())
        for r, rec in enumerate(st.running):
            if rec.index in changed:
                shown += 1
                offered += int(st.run_valid[r, :c].any())
        mask = env.action_masks()
        _, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if term or trunc:
            return shown, offered


def test_one_change_per_instant_blocks_a_changed_job_and_two_let_it_move_once_more() -> None:
    shown1, offered1 = _changed_job_rows_with_a_choice(1, seed=0)
    _, offered2 = _changed_job_rows_with_a_choice(2, seed=0)
    assert shown1 > 0 and offered1 == 0  # env v4's rule
    assert offered2 > 0  # a job started or moved now may move again before time passes
