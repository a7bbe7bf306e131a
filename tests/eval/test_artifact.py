"""The artifact setting: its options, the scenario that turns them on, and the reproduction."""

from __future__ import annotations

import dataclasses

import pytest

from crius_gym import datasets
from crius_gym.eval.artifact import (
    AUTHORS,
    OPTIONS,
    Runner,
    all_setting,
    applied,
    none_setting,
    run_metrics,
    scenario_setting,
    variants,
)
from crius_gym.scenarios import load_scenario
from tests.conftest import require_data


def test_the_artifact_scenario_turns_every_option_on():
    sc = load_scenario("crius-sim-1280-artifact")
    assert scenario_setting(sc) == all_setting()
    compat = sc.sim.artifact_compat
    assert compat.rounds and compat.revalue and compat.suspend_double_count
    assert compat.tuning_charge == "artifact" and compat.round_s == 300.0
    # Our default scenario on the same cluster turns every simulator option off.
    ours = load_scenario("crius-sim-1280")
    assert ours.sim.artifact_compat.active == () and ours.ground_truth == "estimator"


def test_each_option_changes_the_setting_and_is_undone_by_off():
    for opt in OPTIONS:
        on, off = opt.on(none_setting()), opt.off(all_setting())
        assert on != none_setting() or opt.key == "divisor", opt.key
        assert off != all_setting(), opt.key
        if opt.key != "revalue":  # leaving re-valuation out drops the double count with it
            assert opt.on(off) == all_setting(), opt.key
    assert none_setting().iteration_divisor == 5  # the corrected reading is not an option
    kinds = {v.option for v in variants("fcfs")}
    assert "crius_upgrades" not in kinds and "per_type_fifo" in kinds


def test_applied_scenario_carries_the_setting():
    sc = applied(load_scenario("crius-sim-1280-artifact"), none_setting())
    assert sc.ground_truth == "measured" and sc.sim.checkpoint_restore_s == 30.0
    assert sc.sim.artifact_compat.active == () and sc.workload.iteration_divisor == 5


def test_run_metrics_credit_no_free_work_without_revaluation():
    sc = load_scenario("tiny")
    runner = Runner(sc, None, trace=sc.synthetic_trace("test", 0))
    setting = dataclasses.replace(none_setting(), ground_truth="estimator")
    m = run_metrics(runner.run(setting, "crius"))
    # Every job finishes, and the books credit exactly the samples processed.
    assert m["finished"] == 16
    assert m["credited_pct"] == pytest.approx(100.0, abs=1e-6)


def test_artifact_setting_reproduces_the_authors_philly_numbers():
    require_data(datasets.ARENA_TRACES["philly"])
    require_data(datasets.ARENA_MEASUREMENTS)
    runner = Runner(load_scenario("crius-sim-1280-artifact"), 600_000.0)
    for kind, tol in (("fcfs", 0.03), ("crius", 0.10)):
        m = run_metrics(runner.run(all_setting(), kind))
        fin, jct, thr = AUTHORS[kind]
        assert m["finished"] == pytest.approx(fin, rel=tol), kind
        assert m["avg_jct_s"] == pytest.approx(jct, rel=tol), kind
        assert m["avg_throughput"] == pytest.approx(thr, rel=tol), kind
