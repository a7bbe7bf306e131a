"""The guide: Crius's plan is always one env action, and following it is Crius."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.env.features import CELL_FEATURES_BASE, CELL_GUIDE_NEXT, GLOBAL_GUIDE_WAIT
from crius_gym.errors import ConfigError
from crius_gym.policies.registry import make_policy
from crius_gym.rl.agent import HeuristicDriver
from crius_gym.scenarios import load_scenario

DRIVE = EnvConfig(stop_at_every_event=True, max_decisions=10**12)


def drive(name: str, index: int, cfg: EnvConfig = DRIVE):
    sc = load_scenario(name)
    env = CriusEnv(sc, cfg)
    trace = sc.synthetic_trace("test", index, tuner=env.tuner)
    res, stats = HeuristicDriver(make_policy("crius")).run(env, trace)
    direct = sc.make_simulator(env.tuner).run(trace, make_policy("crius"))
    return res, direct, stats


@pytest.mark.parametrize("index", [0, 1])
def test_every_crius_decision_is_one_action_on_tiny(index):
    res, direct, stats = drive("tiny", index)
    assert stats.external == 0 and stats.expressed > 0
    assert [dataclasses.astuple(j) for j in res.jobs] == [
        dataclasses.astuple(j) for j in direct.jobs
    ]


def test_expressibility_floor_on_hetero64():
    res, direct, stats = drive("hetero-64", 0)
    assert stats.expressed / (stats.expressed + stats.external) >= 0.99
    assert [dataclasses.astuple(j) for j in res.jobs] == [
        dataclasses.astuple(j) for j in direct.jobs
    ]


def test_without_a_guide_much_less_is_expressible():
    _, _, with_guide = drive("hetero-64", 0)
    _, _, without = drive("hetero-64", 0, dataclasses.replace(DRIVE, guide=None))
    assert without.external > 10 * max(1, with_guide.external)


def test_following_the_proposal_reproduces_crius_and_the_hint_marks_one_action():
    sc = load_scenario("tiny")
    env = CriusEnv(sc, {"max_decisions": 10**12})
    trace = sc.synthetic_trace("test", 0, tuner=env.tuner)
    obs, _ = env.reset(options={"trace": trace})
    n_cell = len(CELL_FEATURES_BASE) + env.config.max_gpu_types
    while True:
        a = env.guide_action()
        assert a is not None and env.action_masks()[a]
        cells = obs["cells"].reshape(-1, n_cell)[:, CELL_GUIDE_NEXT]
        wait = obs["globals"][GLOBAL_GUIDE_WAIT]
        if a < env.config.start_actions:
            assert cells[a] == 1.0 and cells.sum() == 1.0 and wait == 0.0
        elif a == env.config.num_actions - 1:
            assert wait == 1.0 and cells.sum() == 0.0
        obs, _, term, trunc, info = env.step(a)
        if term or trunc:
            break
    assert info["guide_followed"] == info["guide_proposals"] and info["guide_dropped"] == 0
    direct = sc.make_simulator(env.tuner).run(trace, make_policy("crius"))
    assert env.episode_result().summary.avg_jct_s == pytest.approx(direct.summary.avg_jct_s)


def test_hint_off_keeps_the_cells_but_hides_the_proposal():
    env = CriusEnv("tiny", {"guide_hint": False})
    obs, _ = env.reset(seed=0, options={"split": "test", "index": 0})
    n_cell = len(CELL_FEATURES_BASE) + env.config.max_gpu_types
    assert obs["cells"].reshape(-1, n_cell)[:, CELL_GUIDE_NEXT].sum() == 0.0
    assert env.guide_action() is not None  # the guide still decides what is shown


def test_guide_relative_reward_sums_to_the_jct_difference():
    sc = load_scenario("tiny")
    cfg = {"reward_baseline": "guide", "max_decisions": 10**12}
    env = CriusEnv(sc, cfg)
    trace = sc.synthetic_trace("test", 1, tuner=env.tuner)
    rng = np.random.default_rng(0)
    total = 0.0
    env.reset(options={"trace": trace})
    while True:
        mask = env.action_masks()
        a = env.guide_action() if rng.random() < 0.7 else int(rng.choice(np.flatnonzero(mask)))
        _, r, term, trunc, _ = env.step(int(a))
        total += float(r)
        if term or trunc:
            break
    mine = env.episode_result()
    crius = sc.make_simulator(env.tuner).run(trace, make_policy("crius"))
    jct = sum(j.jct_s for j in mine.jobs if j.status == "finished")
    ref = sum(j.jct_s for j in crius.jobs if j.status == "finished")
    assert total == pytest.approx(-(jct - ref) / env.reward_scale_s, rel=1e-6, abs=1e-6)


def test_action_kind_follows_the_layout():
    cfg = EnvConfig(window_jobs=2, cells_per_job=3, running_jobs=2, head_jobs=1, reconfigure=True)
    kinds = [cfg.action_kind(a) for a in range(cfg.num_actions)]
    assert kinds == ["start"] * 6 + (["reconfigure"] * 3 + ["preempt"]) * 2 + ["wait"]
    with pytest.raises(ConfigError):
        cfg.action_kind(cfg.num_actions)
