"""The Crius heuristic: hand-built situations with a known right decision, ablations, and runs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import Layout
from crius_gym.policies.crius import (
    DATA_PARALLEL,
    CriusOptions,
    CriusPolicy,
    blocker_jobs,
    opportunistic_jobs,
)
from crius_gym.policies.registry import available, make_policy
from crius_gym.sim.actions import Action, Preempt, Reconfigure, Reject, Start
from crius_gym.sim.policy import Policy, PolicyContext
from crius_gym.sim.simulator import Simulator
from crius_gym.workload.job import Job, Trace
from tests.sim.conftest import job, make_sim, trace

A100, A10 = "a100-40gb", "a10"
ONE_A100_NODE = [{"gpu": "a100", "nodes": 1, "gpus_per_node": 4}]
A100_AND_A10 = [
    {"gpu": "a100", "nodes": 1, "gpus_per_node": 2},
    {"gpu": "a10", "nodes": 1, "gpus_per_node": 2},
]
HETERO = [
    {"gpu": "a100", "nodes": 2, "gpus_per_node": 4},
    {"gpu": "a40", "nodes": 4, "gpus_per_node": 2},
    {"gpu": "a10", "nodes": 4, "gpus_per_node": 2},
]
SMALL_HETERO = [  # 12 GPUs: heavy contention, so shrinks, moves and preemptions happen
    {"gpu": "a100", "nodes": 1, "gpus_per_node": 4},
    {"gpu": "a40", "nodes": 2, "gpus_per_node": 2},
    {"gpu": "a10", "nodes": 2, "gpus_per_node": 2},
]
VARIANTS = ("crius", "crius-ns", "crius-nh", "crius-no", "crius-dp")


@dataclass
class Decision:
    time_s: float
    actions: list[Action]
    opportunistic: tuple[int, ...]  # after the actions were applied
    blockers: tuple[int, ...]


def drive(sim: Simulator, tr: Trace, policy: Policy) -> list[Decision]:
    """Run a trace through the step API, recording every decision."""
    sim.reset(tr)
    policy.reset(PolicyContext(sim.cluster, sim.tuner, np.random.default_rng(0)))
    out = []
    while sim.advance():
        actions = list(policy.decide(sim.snapshot()))
        sim.apply(actions)
        snap = sim.snapshot()
        out.append(Decision(sim.now_s, actions, opportunistic_jobs(snap), blocker_jobs(snap)))
    return out


def at(decisions: list[Decision], time_s: float) -> Decision:
    return next(d for d in decisions if d.time_s == pytest.approx(time_s))


def best_cell(sim: Simulator, j: Job, gpu_type: str, layout: Layout) -> Cell:
    """The Cell Crius uses on a layout: the tuner's best stage count there."""
    est = sim.tuner.best_in_layout(j.model, j.global_batch, gpu_type, layout)
    assert est is not None
    return Cell(gpu_type, layout, est.plan.pipeline)


def finished_all(sim: Simulator) -> bool:
    return all(r.status == "finished" for r in sim.result().jobs)


# ------------------------------------------------------------------ registry


def test_variants_registered_with_their_switches():
    assert set(VARIANTS) <= set(available())
    off = {
        "crius-ns": "scaling",
        "crius-nh": "type_change",
        "crius-no": "opportunistic",
    }
    for name in VARIANTS:
        policy = make_policy(name)
        assert isinstance(policy, CriusPolicy) and policy.name == name
        assert policy.tick_interval_s is None
        opts = policy.options
        for flag in ("scaling", "type_change", "opportunistic"):
            assert getattr(opts, flag) is (off.get(name) != flag)
        assert opts.data_parallel_only is (name == "crius-dp")
    assert make_policy("crius", search_depth=1).options.search_depth == 1


# ------------------------------------------------------------------ FIFO, backfilling, blockers

# j0 holds one GPU; j1 (MoE-10B needs 4 A100s) cannot start on the other 3 and nothing can be
# shrunk; j2 (1 GPU) backfills. When j0 leaves, j1 fits with j2's GPU: j2 is preempted.
BACKFILL = (
    job(0, 0.0, model="bert-760m", iters=50, gpus=1, gpu_type=A100),
    job(1, 1.0, model="moe-10b", batch=256, iters=20, gpus=4, gpu_type=A100),
    job(2, 2.0, model="bert-760m", iters=2000, gpus=1, gpu_type=A100),
)


def test_backfill_then_blocker_preempts_the_opportunistic_job():
    sim = make_sim(ONE_A100_NODE, restore_s=30.0)
    decisions = drive(sim, trace(*BACKFILL), make_policy("crius"))
    assert at(decisions, 1.0).actions == []  # j1 does not fit and no downgrade helps
    backfill = at(decisions, 2.0)
    assert [type(a) for a in backfill.actions] == [Start] and backfill.actions[0].job_id == "j2"
    assert backfill.opportunistic == (2,) and backfill.blockers == (1,)
    j0_done = sim.records[0].finish_s
    freed = at(decisions, j0_done)
    assert freed.actions == [
        Preempt("j2"),
        Start("j1", best_cell(sim, BACKFILL[1], A100, Layout(1, 4)), None, "pruned"),
    ]
    assert freed.opportunistic == () and freed.blockers == ()
    assert finished_all(sim)
    assert sim.records[2].preemptions == 1


def test_no_opportunistic_execution_keeps_strict_fifo():
    sim = make_sim(ONE_A100_NODE, restore_s=30.0)
    decisions = drive(sim, trace(*BACKFILL), make_policy("crius-no"))
    assert at(decisions, 2.0).actions == []  # j2 waits behind the blocked j1
    assert all(d.opportunistic == () for d in decisions)
    assert sim.records[2].first_start_s >= sim.records[1].first_start_s
    assert sim.records[2].preemptions == 0 and finished_all(sim)


# ------------------------------------------------------------------ downgrade search


def test_shrink_to_admit_when_summed_throughput_rises():
    # Halving WRN-500M (4 -> 2 A100s) loses less than BERT-760M gains on 2 A100s.
    jobs = (
        job(0, 0.0, model="wide_resnet-500m", batch=256, iters=2000, gpus=4, gpu_type=A100),
        job(1, 100.0, model="bert-760m", iters=100, gpus=2, gpu_type=A100),
    )
    sim = make_sim(ONE_A100_NODE, restore_s=30.0)
    decisions = drive(sim, trace(*jobs), make_policy("crius"))
    assert at(decisions, 100.0).actions == [
        Reconfigure("j0", best_cell(sim, jobs[0], A100, Layout(1, 2)), None, "pruned"),
        Start("j1", best_cell(sim, jobs[1], A100, Layout(1, 2)), None, "pruned"),
    ]
    assert finished_all(sim)

    sim = make_sim(ONE_A100_NODE, restore_s=30.0)
    decisions = drive(sim, trace(*jobs), make_policy("crius-ns"))
    assert at(decisions, 100.0).actions == []  # no scaling: j1 waits for j0


def test_no_shrink_when_summed_throughput_would_drop():
    # MoE-690M loses ~99 samples/s when halved; WRN-1B on 2 GPUs brings ~14.
    jobs = (
        job(0, 0.0, model="moe-690m", batch=256, iters=2000, gpus=4, gpu_type=A100),
        job(1, 100.0, model="wide_resnet-1b", batch=256, iters=100, gpus=2, gpu_type=A100),
    )
    sim = make_sim(ONE_A100_NODE)
    assert at(drive(sim, trace(*jobs), make_policy("crius")), 100.0).actions == []
    sim = make_sim(ONE_A100_NODE)
    eager = make_policy("crius", admit_requires_gain=False)
    kinds = [type(a) for a in at(drive(sim, trace(*jobs), eager), 100.0).actions]
    assert kinds == [Reconfigure, Start]


def test_type_change_to_admit():
    # BERT-2.6B needs the A100 pair (no plan fits on A10s); WRN-1B moves to the A10s (it
    # loses less there than the new job gains: the summed throughput rises).
    jobs = (
        job(0, 0.0, model="wide_resnet-1b", batch=256, iters=2000, gpus=2, gpu_type=A100),
        job(1, 100.0, model="bert-2.6b", iters=100, gpus=2, gpu_type=A100),
    )
    sim = make_sim(A100_AND_A10, restore_s=30.0)
    decisions = drive(sim, trace(*jobs), make_policy("crius"))
    assert at(decisions, 100.0).actions == [
        Reconfigure("j0", best_cell(sim, jobs[0], A10, Layout(1, 2)), None, "pruned"),
        Start("j1", best_cell(sim, jobs[1], A100, Layout(1, 2)), None, "pruned"),
    ]
    sim = make_sim(A100_AND_A10, restore_s=30.0)
    assert at(drive(sim, trace(*jobs), make_policy("crius-nh")), 100.0).actions == []


def test_new_job_changes_type_when_its_own_type_is_full():
    jobs = (
        job(0, 0.0, model="bert-760m", iters=2000, gpus=2, gpu_type=A100),
        job(1, 100.0, model="wide_resnet-500m", batch=256, iters=100, gpus=2, gpu_type=A100),
    )
    sim = make_sim(A100_AND_A10)
    actions = at(drive(sim, trace(*jobs), make_policy("crius-ns")), 100.0).actions
    assert actions == [Start("j1", best_cell(sim, jobs[1], A10, Layout(1, 2)), None, "pruned")]


# ------------------------------------------------------------------ upgrades on departures


def test_upgrade_grows_a_job_after_a_departure():
    jobs = (
        job(0, 0.0, iters=100, gpus=2, gpu_type=A100),
        job(1, 0.0, iters=1000, gpus=2, gpu_type=A100),
    )
    sim = make_sim(ONE_A100_NODE, restore_s=30.0)
    decisions = drive(sim, trace(*jobs), make_policy("crius"))
    assert at(decisions, sim.records[0].finish_s).actions == [
        Reconfigure("j1", best_cell(sim, jobs[1], A100, Layout(1, 4)), None, "pruned")
    ]
    assert sim.records[1].reconfigurations == 1
    sim = make_sim(ONE_A100_NODE, restore_s=30.0)
    drive(sim, trace(*jobs), make_policy("crius-ns"))
    assert sim.records[1].reconfigurations == 0


def test_upgrade_moves_a_job_to_a_faster_type_after_a_departure():
    jobs = (
        job(0, 0.0, iters=100, gpus=2, gpu_type=A100),
        job(1, 0.0, model="wide_resnet-500m", batch=256, iters=2000, gpus=2, gpu_type=A10),
    )
    sim = make_sim(A100_AND_A10, restore_s=30.0)
    decisions = drive(sim, trace(*jobs), make_policy("crius"))
    assert at(decisions, sim.records[0].finish_s).actions == [
        Reconfigure("j1", best_cell(sim, jobs[1], A100, Layout(1, 2)), None, "pruned")
    ]
    sim = make_sim(A100_AND_A10, restore_s=30.0)
    drive(sim, trace(*jobs), make_policy("crius-nh"))
    assert sim.records[1].reconfigurations == 0


def test_upgrade_skips_a_job_whose_pause_would_not_pay_back():
    # j1 has only a few iterations left when j0 leaves: growing would cost 40 s tuning + 30 s
    # restore and save less than that.
    sim = make_sim(ONE_A100_NODE, restore_s=30.0)
    j0 = job(0, 0.0, iters=100, gpus=2, gpu_type=A100)
    t2 = sim.tuner.best_in_layout(j0.model, j0.global_batch, A100, Layout(1, 2)).iter_time_s
    left = 10
    j1 = job(1, 0.0, iters=100 + left, gpus=2, gpu_type=A100)  # same speed, starts alongside
    drive(sim, trace(j0, j1), make_policy("crius"))
    assert sim.records[1].reconfigurations == 0
    assert left * t2 < 70  # the situation is as described
    sim = make_sim(ONE_A100_NODE, restore_s=30.0)
    drive(sim, trace(j0, j1), make_policy("crius", charge_pause=False))
    assert sim.records[1].reconfigurations == 1


# ------------------------------------------------------------------ data-parallel ablation


def test_dp_variant_runs_data_parallel_cells_and_rejects_what_dp_cannot_hold():
    # BERT-6.7B fits on 8 A100s only with model parallelism; no data-parallel replica fits.
    jobs = (
        job(0, 0.0, iters=50, gpus=2, gpu_type=A100),
        job(1, 0.0, model="bert-6.7b", iters=10, gpus=8, gpu_type=A100),
    )
    groups = [{"gpu": "a100", "nodes": 2, "gpus_per_node": 4}]
    sim = make_sim(groups)
    first = drive(sim, trace(*jobs), make_policy("crius-dp"))[0].actions
    start, reject = first
    assert isinstance(start, Start) and start.constraints == DATA_PARALLEL
    assert start.cell.stages == 1
    assert isinstance(reject, Reject) and "data-parallel" in reject.reason
    result = sim.result()
    assert [r.status for r in result.jobs] == ["finished", "rejected"]

    sim = make_sim(groups)
    drive(sim, trace(*jobs), make_policy("crius"))
    assert finished_all(sim)


# ------------------------------------------------------------------ runs

MODELS = ("bert-760m", "bert-1.3b", "moe-690m", "moe-1.3b", "wide_resnet-500m", "wide_resnet-1b")
TYPES = (A100, "a40", A10)


def random_trace(seed: int, n: int, mean_gap_s: float = 300.0) -> Trace:
    rng = np.random.default_rng(seed)
    t, jobs = 0.0, []
    for i in range(n):
        t += float(rng.exponential(mean_gap_s))
        model = MODELS[int(rng.integers(len(MODELS)))]
        batch = 128 if model.startswith("bert") else 256
        jobs.append(
            job(
                i,
                round(t, 1),
                model=model,
                batch=batch,
                iters=int(rng.integers(100, 3000)),
                gpus=int(2 ** rng.integers(0, 4)),
                gpu_type=TYPES[int(rng.integers(len(TYPES)))],
            )
        )
    return trace(*jobs)


def test_deterministic_per_job_results():
    tr = random_trace(seed=3, n=40, mean_gap_s=150.0)
    runs = [make_sim(HETERO, restore_s=30.0).run(tr, make_policy("crius")) for _ in range(2)]
    assert runs[0].jobs == runs[1].jobs
    assert runs[0].summary.reconfigurations > 0  # the run exercised more than plain starts


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(3, 16),
    gap=st.sampled_from([20.0, 200.0]),
    groups=st.sampled_from([HETERO, SMALL_HETERO]),
)
def test_every_action_is_accepted_on_random_traces(seed, n, gap, groups):
    tr = random_trace(seed, n, gap)
    for name in VARIANTS:
        sim = make_sim(groups, restore_s=30.0)
        res = sim.run(tr, make_policy(name))  # raises InvalidActionError on a bad action
        for r in res.jobs:
            assert r.status == "finished" or (name == "crius-dp" and r.status == "rejected")
            if r.status == "finished":
                assert r.num_gpus in (1, 2, 4, 8, 16)


def test_beats_fcfs_on_average_jct():
    tr = random_trace(seed=11, n=100, mean_gap_s=120.0)
    crius = make_sim(HETERO, restore_s=30.0).run(tr, make_policy("crius")).summary
    fcfs = make_sim(HETERO, restore_s=30.0).run(tr, make_policy("fcfs")).summary
    assert crius.finished == 100
    assert not math.isnan(fcfs.avg_jct_s)
    assert crius.avg_jct_s < 0.8 * fcfs.avg_jct_s


def test_options_are_validated():
    with pytest.raises(Exception, match="search_depth"):
        CriusOptions(search_depth=-1)
