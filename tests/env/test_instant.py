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


def test_the_origin_is_the_cell_held_when_the_instant_began_until_the_job_is_blocked() -> None:
    from crius_gym.perf.cell import Cell
    from crius_gym.perf.plan import Layout

    a, b = Cell("a100-40gb", Layout(1, 4), 1), Cell("a40", Layout(1, 2), 1)
    ch = InstantChanges(limit=3)
    ch.start(5.0)
    ch.add(1, a)  # moved off a
    ch.add(1, b)  # moved again: its origin stays a
    ch.add(2, None)  # started from the queue: no origin
    assert ch.origins() == {1: a}
    assert ch.copy().origins() == {1: a}
    ch.add(1, a)
    assert ch.origins() == {}  # blocked: nothing more to mask
    ch.start(6.0)
    ch.add(1, b)
    assert ch.origins() == {1: b}


def test_a_second_change_never_puts_a_job_back_where_the_instant_found_it() -> None:
    env = CriusEnv(load_scenario("tiny"), EnvConfig(changes_per_instant=2))
    rng = np.random.default_rng(3)
    env.reset(seed=3)
    seen = 0
    while True:
        st = env._state
        assert st is not None
        back = env._changes.origins()
        for r, rec in enumerate(st.running):
            if rec.index in back:
                seen += 1
                for j, ce in enumerate(st.run_cells[r]):
                    if ce.cell == back[rec.index]:
                        assert not st.run_valid[r, j]
        for k, rec in enumerate(st.window):
            if rec.index in back:  # preempted at this instant
                for j, ce in enumerate(st.cells[k]):
                    if ce.cell == back[rec.index]:
                        assert not st.fits[k, j]
        mask = env.action_masks()
        _, _, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        if term or trunc:
            break
    assert seen > 0, "the episode never showed a job changed once at an instant"
