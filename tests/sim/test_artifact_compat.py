"""The artifact-compatibility options of the simulator, one at a time, with known answers."""

from __future__ import annotations

import pytest

from crius_gym.errors import ConfigError
from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.calibration import get_calibration
from crius_gym.perf.cell import Cell
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.framework import get_framework
from crius_gym.perf.plan import Layout
from crius_gym.perf.tuner import Tuner
from crius_gym.policies.registry import make_policy
from crius_gym.sim.actions import Preempt, Reconfigure, Start
from crius_gym.sim.artifact_compat import ArtifactCompat
from crius_gym.sim.records import JobStatus
from crius_gym.sim.simulator import SimConfig, Simulator
from tests.sim.conftest import job, trace

ONE, TWO, FOUR = (Cell("a100-40gb", Layout(1, n), 1) for n in (1, 2, 4))


class FixedTruth:
    """Seconds per iteration by GPU count: 10 s on 1 GPU, 5 s on 2, 2.5 s on 4."""

    name = "fixed"

    def iter_time_s(self, job, cell, constraints):
        return 10.0 / cell.num_gpus


def sim_with(**compat):
    cluster = build_cluster([{"gpu": "a100", "nodes": 1, "gpus_per_node": 4}])
    tuner = Tuner(cluster, Estimator(get_framework("alpa"), get_calibration("alpa")))
    config = SimConfig(artifact_compat=ArtifactCompat(**compat))
    return Simulator(cluster, tuner, FixedTruth(), config)


def run_grow_at_300(sim):
    """j0 runs on 1 GPU from 0 s; at 300 s (j1 arrives) it moves to 2 GPUs."""
    sim.reset(trace(job(0, 0.0, iters=1000), job(1, 300.0, iters=1)))
    assert sim.advance() and sim.now_s == 0.0
    sim.apply([Start("j0", ONE, None, "none")])
    assert sim.advance() and sim.now_s == 300.0
    sim.apply([Reconfigure("j0", TWO, None, "none")])
    return sim.records[0]


@pytest.mark.parametrize(("progress", "done"), [("revalue", 60.0), ("integrate", 30.0)])
def test_revalue_reprices_executed_seconds_at_the_new_speed(progress, done):
    rec = run_grow_at_300(sim_with(progress=progress))
    # 300 s at 10 s/iteration, then a 5 s/iteration Cell: 300 / 5 = 60 under re-valuation.
    assert rec.progress_iters == pytest.approx(done)
    assert rec.status is JobStatus.RUNNING


def test_revalue_finishes_on_the_revalued_work():
    sim = sim_with(progress="revalue")
    rec = run_grow_at_300(sim)
    while sim.advance():
        pass
    # 1000 iterations at 5 s are 5,000 executed seconds in all, 300 of them already run.
    assert rec.finish_s == pytest.approx(300.0 + 5000.0 - 300.0)
    integrate = sim_with()
    rec = run_grow_at_300(integrate)
    while integrate.advance():
        pass
    assert rec.finish_s == pytest.approx(300.0 + (1000 - 30) * 5.0)


def test_revalue_shrink_removes_work_done():
    sim = sim_with(progress="revalue")
    sim.reset(trace(job(0, 0.0, iters=1000), job(1, 300.0, iters=1)))
    sim.advance()
    sim.apply([Start("j0", TWO, None, "none")])
    sim.advance()
    sim.apply([Reconfigure("j0", ONE, None, "none")])
    assert sim.records[0].progress_iters == pytest.approx(30.0)  # 60 at 5 s became 30 at 10 s


def suspend_and_restart(sim):
    """j0 runs 300 s on 1 GPU, is preempted at 300 s and restarted at 600 s."""
    sim.reset(trace(job(0, 0.0, iters=1000), job(1, 300.0, iters=1), job(2, 600.0, iters=1)))
    sim.advance()
    sim.apply([Start("j0", ONE, None, "none")])
    assert sim.advance() and sim.now_s == 300.0
    sim.apply([Preempt("j0")])
    assert sim.advance() and sim.now_s == 600.0
    sim.apply([Start("j0", ONE, None, "none")])
    return sim.records[0]


@pytest.mark.parametrize(
    ("compat", "at_restart"),
    [
        ({"progress": "revalue", "suspend_double_count": True}, 60.0),
        ({"progress": "revalue"}, 30.0),
        ({}, 30.0),
    ],
)
def test_suspension_double_count(compat, at_restart):
    sim = sim_with(**compat)
    rec = suspend_and_restart(sim)
    # The artifact lowers the target to the 970 remaining iterations and keeps the 300 executed
    # seconds, so they count again after the restart: 30 + 300 / 10 = 60 at once.
    assert rec.progress_iters == pytest.approx(at_restart)
    assert rec.preemptions == 1


def test_double_count_needs_revalue():
    with pytest.raises(ConfigError, match="suspend_double_count"):
        ArtifactCompat(suspend_double_count=True)
    for bad in ({"round_s": 0}, {"progress": "free"}, {"tuning_charge": "none"}):
        with pytest.raises(ConfigError):
            ArtifactCompat(**bad)


def test_round_arithmetic():
    c = ArtifactCompat(rounds=True)
    assert [c.round_start_s(t) for t in (0.0, 1.0, 300.0, 301.0, 600.0, 899.9)] == [
        0.0,
        0.0,
        0.0,
        300.0,
        300.0,
        600.0,
    ]
    assert c.completion_s(300.0, 301.0) == 600.0
    assert c.completion_s(300.0, 600.0) == 600.0
    assert c.completion_s(300.0, 299.0) == 600.0  # credited after at least the round it ran
    assert c.completion_s(300.0, 600.0 + 1e-9) == 600.0  # float drift stays on the boundary
    assert [c.tuning_pause_s(t) for t in (0.0, 40.0, 300.0, 301.0, 600.0, 900.0)] == [
        0.0,
        0.0,
        0.0,
        300.0,
        300.0,
        600.0,
    ]


def test_rounds_move_arrivals_to_their_round_and_completions_to_the_next_boundary():
    sim = sim_with(rounds=True)
    res = sim.run(trace(job(0, 301.0, iters=7), job(1, 302.0, iters=1)), make_policy("fcfs"))
    a, b = res.jobs
    assert a.arrival_s == b.arrival_s == 300.0  # arrival at 301 s is seen at 300 s
    for r in (a, b):
        assert r.status == "finished"
        assert r.jct_s % 300.0 == pytest.approx(0.0, abs=1e-9)
        assert r.finish_s % 300.0 == pytest.approx(0.0, abs=1e-9)
    plain = sim_with().run(trace(job(0, 301.0, iters=7)), make_policy("fcfs")).jobs[0]
    assert plain.arrival_s == 301.0 and plain.jct_s % 300.0 != pytest.approx(0.0)


def test_rounds_hold_gpus_to_the_boundary_and_decide_only_there():
    sim = sim_with(rounds=True)
    # Two 4-GPU jobs of 10 iterations (25 s each) on 4 GPUs: the second starts only when the
    # first is seen to finish, at the next boundary.
    a100 = "a100-40gb"
    jobs = [job(i, 5.0 * i, iters=10, gpus=4, gpu_type=a100) for i in range(2)]
    sim.reset(trace(*jobs))
    times = []
    fcfs = make_policy("fcfs")  # data parallel, no tuning pause
    while sim.advance():
        times.append(sim.now_s)
        sim.apply(fcfs.decide(sim.snapshot()))
    assert times == [0.0, 300.0, 600.0]
    res = sim.result("fcfs")
    assert [r.first_start_s for r in res.jobs] == [0.0, 300.0]
    assert [r.finish_s for r in res.jobs] == [300.0, 600.0]
    # A job that finished mid-round keeps iterating (and counting in throughput) to the boundary.
    assert res.jobs[0].running_s == pytest.approx(300.0)


@pytest.mark.parametrize(("cell", "pause"), [(ONE, 0.0), (TWO, 0.0), (FOUR, 300.0)])
def test_artifact_tuning_charge(cell, pause):
    sim = sim_with(tuning_charge="artifact")
    sim.reset(trace(job(0, 0.0, iters=100)))
    sim.advance()
    # The unpruned search is 150 s per GPU, capped at 600 s: 150, 300 and 600 s here. The
    # artifact charges no progress up to one round and skips one round beyond it.
    sim.apply([Start("j0", cell, None, "full")])
    rec = sim.records[0]
    while sim.advance():
        pass
    assert rec.paused_s == pytest.approx(pause)
    assert rec.finish_s == pytest.approx(pause + 100 * 10.0 / cell.num_gpus)
    plain = sim_with()
    plain.reset(trace(job(0, 0.0, iters=100)))
    plain.advance()
    plain.apply([Start("j0", cell, None, "full")])
    while plain.advance():
        pass
    assert plain.records[0].paused_s == pytest.approx(150.0 * cell.num_gpus)


def test_defaults_are_off():
    c = ArtifactCompat()
    assert (c.rounds, c.progress, c.suspend_double_count, c.tuning_charge) == (
        False,
        "integrate",
        False,
        "pause",
    )
    assert c.active == ()
    assert SimConfig().artifact_compat == c
