"""The tails of truncated rollouts: the upgrade schedule against the list schedule and by hand."""

from __future__ import annotations

import dataclasses

import pytest

from crius_gym.policies.rollout_tails import list_schedule_tail, upgrade_schedule_tail
from crius_gym.scenarios import load_scenario
from crius_gym.sim.actions import Start
from crius_gym.workload.job import Trace


def test_without_upgrades_it_is_the_list_schedule(crowded):
    sim, _ = crowded
    work = sim.snapshot().fork()
    listed = list_schedule_tail(work, 3)
    frozen = upgrade_schedule_tail(work, 3, max_moves=0)
    assert frozen.rest_s.keys() == listed.rest_s.keys()
    for key, rest in listed.rest_s.items():
        assert frozen.rest_s[key] == pytest.approx(rest)
    assert frozen.queue_s == pytest.approx(listed.queue_s)
    assert frozen.gpu_s == pytest.approx(listed.gpu_s)


def test_the_upgrade_schedule_values_every_open_job(crowded):
    sim, _ = crowded
    work = sim.snapshot().fork()
    upgraded = upgrade_schedule_tail(work, 3)
    assert upgraded.rest_s.keys() == list_schedule_tail(work, 3).rest_s.keys()
    assert all(rest >= 0 for rest in upgraded.rest_s.values())


@pytest.mark.parametrize("job", range(4))
def test_a_lone_job_on_a_small_cell_grows_once_as_crius_would(job):
    sc = load_scenario("hetero-64")
    first = sc.synthetic_trace("test", 0).jobs[job]
    sim = sc.make_simulator()
    sim.reset(Trace("lone", (dataclasses.replace(first, arrival_s=0.0),)), None, None)
    sim.advance()
    snap = sim.snapshot()
    ranked = snap.candidates(first).candidates
    small = min(ranked, key=lambda c: (c.cell.num_gpus, c.iter_time_s))
    sim.apply([Start(first.job_id, small.cell)])
    work = sim.snapshot().fork()
    rec = work.records[0]
    rest = upgrade_schedule_tail(work, 3)(rec)
    # By hand: on an empty cluster, the move with the largest throughput gain (a grow to at
    # most twice the GPUs on its type, or another type at no more GPUs), once (one change per
    # event, and no other event comes before it ends); its pause restarts from now.
    n, own = small.cell.num_gpus, small.cell.gpu_type
    moves = [
        c
        for c in ranked
        if (c.cell.gpu_type == own and n < c.cell.num_gpus <= 2 * n)
        or (c.cell.gpu_type != own and c.cell.num_gpus <= n)
    ]
    best = min(moves, key=lambda c: c.iter_time_s, default=None)
    stay_s = max(0.0, rec.resume_at_s - work.now_s) + rec.remaining_iters * rec.iter_time_s
    assert list_schedule_tail(work, 3)(rec) == pytest.approx(stay_s)
    if best is None or best.iter_time_s >= rec.iter_time_s:
        assert rest == pytest.approx(stay_s)
        return
    pause_s = snap.tuning_overhead_s(best.cell.num_gpus, "pruned") + snap.restore_s
    moved_s = pause_s + rec.remaining_iters * best.iter_time_s
    assert rest == pytest.approx(min(moved_s, stay_s))
    assert rest < stay_s or moved_s >= stay_s
