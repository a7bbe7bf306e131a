import math

import pytest

from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import Layout, PlanConstraints
from crius_gym.policies.registry import make_policy
from crius_gym.sim.actions import InvalidActionError, Preempt, Reconfigure, Start
from crius_gym.sim.records import JobStatus
from tests.sim.conftest import job, make_sim, trace

DP = PlanConstraints(pipeline=1, tensor=1)


def test_single_job_known_jct():
    sim = make_sim([{"gpu": "a100", "nodes": 1, "gpus_per_node": 1}])
    j = job(0, 10.0, iters=200)
    t = sim.tuner.best_in_layout(j.model, j.global_batch, "a100-40gb", Layout(1, 1), DP)
    res = sim.run(trace(j), make_policy("fcfs"))
    r = res.jobs[0]
    assert r.status == "finished"
    assert r.jct_s == pytest.approx(200 * t.iter_time_s, rel=1e-12)
    assert r.queueing_s == 0 and r.paused_s == 0
    assert res.summary.avg_throughput == pytest.approx(
        128 / t.iter_time_s * r.running_s / res.summary.makespan_s, rel=1e-9
    )


def test_fcfs_blocks_and_queues():
    sim = make_sim([{"gpu": "a100", "nodes": 1, "gpus_per_node": 1}])
    jobs = [job(0, 0.0, iters=100), job(1, 1.0, iters=100)]
    res = sim.run(trace(*jobs), make_policy("fcfs"))
    a, b = res.jobs
    assert b.first_start_s == pytest.approx(a.finish_s)
    assert b.queueing_s == pytest.approx(a.finish_s - 1.0)


def test_step_api_preempt_keeps_progress_and_pays_restore(small_sim):
    sim = small_sim
    j = job(0, 0.0, iters=1000)
    sim.reset(trace(j))
    assert sim.advance()
    cell = Cell("a100-40gb", Layout(1, 4), 1)
    sim.apply([Start("j0", cell, None, "pruned")])
    rec = sim.records[0]
    assert rec.status is JobStatus.PAUSED and rec.resume_at_s == pytest.approx(40.0)
    assert sim.snapshot().free_gpus("a100-40gb") == 4
    assert sim.advance()  # the resume is not a decision point; the completion is
    assert rec.status is JobStatus.FINISHED
    assert not sim.advance()  # nothing left
    assert rec.finish_s == pytest.approx(40.0 + 1000 * rec.iter_time_s)


def test_preempt_and_restart(small_sim):
    sim = small_sim
    jobs = [job(0, 0.0, iters=1000), job(1, 100.0, iters=10)]
    sim.reset(trace(*jobs))
    sim.advance()
    c = Cell("a40", Layout(1, 2), 1)
    sim.apply([Start("j0", c, None, "none")])
    t0 = sim.records[0].iter_time_s
    assert sim.advance() and sim.now_s == 100.0  # j1 arrives
    sim.apply([Preempt("j0")])
    r0 = sim.records[0]
    assert r0.status is JobStatus.WAITING and r0.progress_iters == pytest.approx(100.0 / t0)
    assert r0.preemptions == 1
    sim.apply([Start("j0", c, None, "none")])  # restart: pays the 30 s restore only
    assert r0.status is JobStatus.PAUSED and r0.resume_at_s == pytest.approx(130.0)
    while sim.advance():
        pass
    res = sim.result("manual")
    assert res.jobs[0].status == "finished"
    assert res.jobs[0].finish_s == pytest.approx(130.0 + (1000 - 100.0 / t0) * t0)
    assert res.jobs[0].paused_s == pytest.approx(30.0)
    assert res.jobs[1].status == "unfinished"  # nobody started it


def test_reconfigure_changes_rate_and_invalid_actions(small_sim):
    sim = small_sim
    sim.reset(trace(job(0, 0.0, iters=500), job(1, 0.0, model="bert-6.7b", iters=5)))
    sim.advance()
    small, big = Cell("a40", Layout(1, 2), 1), Cell("a100-40gb", Layout(2, 4), 1)
    sim.apply([Start("j0", small, None, "none")])
    with pytest.raises(InvalidActionError):
        sim.apply([Start("j0", small, None, "none")])  # not waiting any more
    with pytest.raises(InvalidActionError):
        sim.apply([Start("j1", Cell("a40", Layout(1, 1), 1), None, "none")])  # no plan fits
    with pytest.raises(InvalidActionError):
        sim.apply([Start("jX", small, None, "none")])
    sim.apply([Reconfigure("j0", big, None, "pruned")])
    r = sim.records[0]
    assert r.cell == big and r.reconfigurations == 1 and r.status is JobStatus.PAUSED
    assert sim.snapshot().free_gpus("a40") == 8 and sim.snapshot().free_gpus("a100-40gb") == 0
    with pytest.raises(InvalidActionError):
        sim.apply([Start("j1", Cell("a100-40gb", Layout(1, 4), 1), None, "none")])  # full


def test_rejected_when_it_fits_nowhere():
    sim = make_sim([{"gpu": "t4", "nodes": 1, "gpus_per_node": 1}])
    res = sim.run(trace(job(0, 0.0, model="bert-6.7b", batch=512)), make_policy("random"))
    assert res.jobs[0].status == "rejected" and res.summary.rejected == 1
    assert "fits nowhere" in res.jobs[0].reject_reason
    assert math.isnan(res.summary.avg_jct_s)


def test_late_rejection_counts_as_arrived():
    # The second job arrives long after the first finished and can never run: it arrived,
    # and the run lasts until it did (issue 14: it was missing from `arrived`).
    sim = make_sim([{"gpu": "a100", "nodes": 1, "gpus_per_node": 1}])
    late = job(1, 10**7, gpus=8)  # more GPUs than the cluster has
    res = sim.run(trace(job(0, 0.0, iters=10), late), make_policy("fcfs"))
    assert [j.status for j in res.jobs] == ["finished", "rejected"]
    assert res.summary.arrived == 2 and res.summary.makespan_s == pytest.approx(10**7)


def test_horizon_reports_unfinished():
    sim = make_sim([{"gpu": "a100", "nodes": 1, "gpus_per_node": 1}])
    res = sim.run(trace(job(0, 0.0, iters=10**6)), make_policy("fcfs"), horizon_s=1000.0)
    assert res.jobs[0].status == "unfinished" and res.summary.makespan_s == 1000.0
    assert res.jobs[0].running_s == pytest.approx(1000.0)


def _time_in_system_from_result(res):
    """The same sum from the result's job rows (what vine rollouts used to build)."""
    end = res.summary.makespan_s
    return sum(
        (j.finish_s if j.status == "finished" else end) - j.arrival_s
        for j in res.jobs
        if j.status != "rejected" and j.arrival_s <= end
    )


def test_time_in_system_equals_the_sum_over_the_result():
    # Finished, rejected and (with a horizon) unfinished jobs, and a job arriving after it.
    cluster = [{"gpu": "a100", "nodes": 1, "gpus_per_node": 1}]
    jobs = (job(0, 0.0, iters=10), job(1, 5.0, gpus=8), job(2, 20.0, iters=10**6))
    for horizon in (None, 3000.0):
        sim = make_sim(cluster)
        res = sim.run(trace(*jobs, job(3, 10**5, iters=10)), make_policy("fcfs"), horizon_s=horizon)
        assert {j.status for j in res.jobs} >= {"finished", "rejected"}
        assert sim.time_in_system_s() == _time_in_system_from_result(res)
    assert _time_in_system_from_result(res) > 0 and res.jobs[2].status == "unfinished"
