"""The run's schedule (RunResult.segments): consistent with the jobs, the series and clones."""

from __future__ import annotations

import copy
import itertools
import pickle
from collections import Counter

import numpy as np
import pytest

from crius_gym.eval.gantt import gpu_rows
from crius_gym.policies.registry import make_policy
from crius_gym.scenarios import load_scenario
from crius_gym.sim.policy import PolicyContext
from crius_gym.sim.schedule import ScheduleLog, Segment


@pytest.fixture(scope="module")
def testbed_run():
    sc = load_scenario("hetero-64")
    trace = sc.synthetic_trace("test", 1)
    return sc, trace, sc.make_simulator().run(trace, make_policy("crius"))


def seg(i: int, start: float = 0.0) -> Segment:
    return Segment(i, f"j{i}", "a40", (0,), 1, start, start + 1.0, "start", "finish")


def test_segments_agree_with_the_job_results(testbed_run):
    sc, _, result = testbed_run
    ended = Counter(s.ended for s in result.segments)
    began = Counter(s.began for s in result.segments)
    jobs = result.jobs
    assert ended["finish"] == sum(j.status == "finished" for j in jobs)
    assert ended["preempt"] == began["resume"] == sum(j.preemptions for j in jobs)
    assert ended["reconfigure"] == began["reconfigure"] == sum(j.reconfigurations for j in jobs)
    assert began["start"] == sum(not np.isnan(j.first_start_s) for j in jobs)
    assert ended["reconfigure"] > 0  # the trace exercises the moves
    by_job: dict[int, list[Segment]] = {}
    for s in result.segments:
        assert s.end_s >= s.start_s
        by_job.setdefault(s.job_index, []).append(s)
    for index, segs in by_job.items():
        segs.sort(key=lambda s: s.start_s)
        job = jobs[index]
        assert segs[0].began == "start" and segs[0].start_s == job.first_start_s
        assert all(a.end_s <= b.start_s for a, b in itertools.pairwise(segs))
        if job.status == "finished":
            assert segs[-1].ended == "finish" and segs[-1].end_s == job.finish_s
        # Held time = time paused (restoring) + time iterating.
        held = sum(s.end_s - s.start_s for s in segs)
        assert held == pytest.approx(job.paused_s + job.running_s, rel=1e-9, abs=1e-6)
    # No node is ever over-booked, and GPU-seconds match the busy-GPU series.
    for group in sc.cluster.groups:
        gpu_rows([s for s in result.segments if s.gpu_type == group.gpu_type], group.gpus_per_node)
    t, busy = result.series.time_s, result.series.busy_gpus
    area = float(np.sum(busy[:-1] * np.diff(t)))
    held_gpu_s = sum(s.num_gpus * (s.end_s - s.start_s) for s in result.segments)
    assert held_gpu_s == pytest.approx(area, rel=1e-9)


def test_a_clone_has_its_own_schedule_and_peeking_changes_nothing(testbed_run):
    sc, trace, whole = testbed_run
    sim = sc.make_simulator()
    policy = make_policy("crius")
    sim.reset(trace, None, policy.tick_interval_s)
    policy.reset(PolicyContext(sim.cluster, sim.tuner, np.random.default_rng(0)))
    steps = 0
    while sim.advance():
        sim.decisions += 1
        actions = policy.decide(sim.snapshot())
        if actions:
            sim.apply(actions)
        steps += 1
        if steps == 60:
            twin, fcfs = sim.clone(), make_policy("fcfs")
            fcfs.reset(PolicyContext(twin.cluster, twin.tuner, np.random.default_rng(0)))
            before = sim.result("crius").segments
            while twin.advance():
                if acts := fcfs.decide(twin.snapshot()):
                    twin.apply(acts)
            assert len(twin.result("fcfs").segments) > len(before)
            assert sim.result("crius").segments == before  # the clone's appends stay its own
    # Neither the clone nor result() mid-run (it settles copies) changed the run.
    assert sim.result("crius").segments == whole.segments


def test_a_stopped_run_reports_open_holds(testbed_run):
    sc, trace, _ = testbed_run
    result = sc.make_simulator().run(trace, make_policy("crius"), horizon_s=3600.0)
    open_ = [s for s in result.segments if s.ended == "open"]
    assert open_ and all(s.end_s == pytest.approx(3600.0) for s in open_)


def test_schedule_log_copies_diverge():
    log = ScheduleLog()
    log.append(seg(0))
    twin = copy.deepcopy(log)
    log.append(seg(1))
    twin.append(seg(2))
    assert [s.job_index for s in log] == [0, 1]
    assert [s.job_index for s in twin] == [0, 2]
    again = pickle.loads(pickle.dumps(twin))
    again.append(seg(3))
    assert [s.job_index for s in again] == [0, 2, 3] and len(twin) == 2


def test_gpu_rows_refuses_an_overbooked_node():
    with pytest.raises(ValueError, match="node 0 has 0 free GPUs"):
        gpu_rows([seg(0), seg(1, start=0.5)], gpus_per_node=1)
    assert gpu_rows([seg(0), seg(1, start=1.0)], gpus_per_node=1) == [[0], [0]]
