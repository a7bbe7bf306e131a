"""The Gavel, Sia and LAS baselines: complete runs, determinism, hand-built cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from crius_gym.policies.assignment import assign
from crius_gym.policies.data_parallel import dp_throughput
from crius_gym.policies.registry import available, make_policy
from crius_gym.sim.actions import Reconfigure, Reject, Start
from crius_gym.sim.policy import PolicyContext
from crius_gym.sim.simulator import Simulator
from crius_gym.workload.synthetic import SyntheticConfig, generate
from tests.sim.conftest import job, make_sim, trace

POLICIES = ("gavel", "sia", "las")

# Four GPU types, 32 GPUs, node sizes as in the Crius clusters (v100 with 8 per node here).
MIXED = [
    {"gpu": "a100", "nodes": 2, "gpus_per_node": 4},
    {"gpu": "v100", "nodes": 1, "gpus_per_node": 8},
    {"gpu": "a40", "nodes": 4, "gpus_per_node": 2},
    {"gpu": "a10", "nodes": 4, "gpus_per_node": 2},
]


def random_trace(sim: Simulator, seed: int = 3):
    """60 Philly-like jobs (model mix, requests), short enough to run in a second."""
    cfg = SyntheticConfig(
        num_jobs=60,
        mean_interarrival_s=300.0,
        iterations_log_mu=math.log(300),
        iterations_log_sigma=0.8,
        iterations_min=20,
        iterations_max=3000,
    )
    return generate(cfg, np.random.default_rng(seed), sim.cluster.gpu_types, name="rand")


def first_decision(sim: Simulator, policy_name: str, jobs, **options):
    """The policy's actions at the first decision point of a trace."""
    policy = make_policy(policy_name, **options)
    sim.reset(trace(*jobs), tick_interval_s=policy.tick_interval_s)
    policy.reset(PolicyContext(sim.cluster, sim.tuner, np.random.default_rng(0)))
    assert sim.advance()
    return policy.decide(sim.snapshot())


def test_registered():
    assert set(POLICIES) <= set(available())


@pytest.mark.parametrize("name", POLICIES)
def test_random_trace_runs_to_completion(name):
    sim = make_sim(MIXED, restore_s=30.0)
    tr = random_trace(sim)
    res = sim.run(tr, make_policy(name))  # an invalid action would raise here
    statuses = {j.status for j in res.jobs}
    assert statuses <= {"finished", "rejected"}
    assert res.summary.finished > 30
    for j in res.jobs:
        if j.status == "rejected":
            assert j.reject_reason
        else:
            assert j.progress_iters == j.iterations
    if name == "las":
        assert res.summary.preemptions > 0
    else:
        assert res.summary.reconfigurations + res.summary.preemptions > 0


@pytest.mark.parametrize("name", POLICIES)
def test_deterministic(name):
    def run():
        sim = make_sim(MIXED, restore_s=30.0)
        res = sim.run(random_trace(sim, seed=5), make_policy(name))
        return [repr(j) for j in res.jobs]  # repr: NaN fields compare equal

    assert run() == run()


def test_gavel_moves_the_job_that_loses_least_off_the_fast_type():
    # With data parallelism on two A10 nodes, BERT-760M keeps ~0.3 of its A100 speed,
    # Wide-ResNet-1B (fp32 convolution gradients over the nodes' network) ~0.16: when the
    # Wide-ResNet job arrives and both want the only A100 node, Gavel moves the BERT job to
    # the A10s, and back once the Wide-ResNet job is done.
    sim = make_sim(
        [
            {"gpu": "a100", "nodes": 1, "gpus_per_node": 4},
            {"gpu": "a10", "nodes": 2, "gpus_per_node": 2},
        ]
    )
    bert = job(0, 0.0, model="bert-760m", batch=256, iters=3000, gpus=4, gpu_type="a100-40gb")
    wrn = job(1, 100.0, model="wide_resnet-1b", batch=256, iters=300, gpus=4, gpu_type="a100-40gb")
    tuner = sim.tuner
    rel = {
        j.job_id: dp_throughput(tuner, j, "a10", 4) / dp_throughput(tuner, j, "a100-40gb", 4)
        for j in (bert, wrn)
    }
    assert rel["j0"] > 0.25 and rel["j1"] < 0.2
    (start,) = first_decision(sim, "gavel", [bert, wrn])
    assert isinstance(start, Start) and start.cell.gpu_type == "a100-40gb"
    policy = make_policy("gavel")
    sim.reset(trace(bert, wrn), tick_interval_s=policy.tick_interval_s)
    policy.reset(PolicyContext(sim.cluster, sim.tuner, np.random.default_rng(0)))
    sim.advance()
    sim.apply(policy.decide(sim.snapshot()))
    sim.advance()
    assert sim.now_s == 100.0
    move, start = policy.decide(sim.snapshot())
    assert isinstance(move, Reconfigure) and move.job_id == "j0" and move.cell.gpu_type == "a10"
    assert isinstance(start, Start) and start.job_id == "j1"
    assert start.cell.gpu_type == "a100-40gb"
    res = sim.run(trace(bert, wrn), make_policy("gavel"))
    a, b = res.jobs
    assert a.status == b.status == "finished"
    assert a.reconfigurations == 2 and a.gpu_type == "a100-40gb"  # back after j1 finished
    assert b.reconfigurations == 0 and b.gpu_type == "a100-40gb" and b.first_start_s == 100.0


def test_gavel_without_migrations_keeps_the_first_job():
    sim = make_sim(
        [
            {"gpu": "a100", "nodes": 1, "gpus_per_node": 4},
            {"gpu": "a10", "nodes": 2, "gpus_per_node": 2},
        ]
    )
    wrn = job(0, 0.0, model="wide_resnet-500m", batch=256, iters=3000, gpus=4, gpu_type="a100-40gb")
    moe = job(1, 100.0, model="moe-690m", batch=256, iters=3000, gpus=4, gpu_type="a100-40gb")
    res = sim.run(trace(wrn, moe), make_policy("gavel", max_migrations=0))
    assert res.jobs[0].reconfigurations == 0 and res.jobs[1].gpu_type == "a10"


def test_sia_elastic_with_contention():
    sim = make_sim([{"gpu": "a100", "nodes": 4, "gpus_per_node": 4}])
    alone = first_decision(sim, "sia", [job(0, 0.0, batch=256, iters=5000)])
    assert [a.cell.num_gpus for a in alone if isinstance(a, Start)] == [16]
    crowd = first_decision(sim, "sia", [job(i, 0.0, batch=256, iters=5000) for i in range(8)])
    starts = [a for a in crowd if isinstance(a, Start)]
    assert len(starts) == 8 and max(a.cell.num_gpus for a in starts) <= 4
    assert sum(a.cell.num_gpus for a in starts) <= 16


def test_sia_shrinks_a_running_job_for_an_arrival():
    sim = make_sim([{"gpu": "a100", "nodes": 4, "gpus_per_node": 4}], restore_s=30.0)
    jobs = [job(0, 0.0, batch=256, iters=200_000), job(1, 1000.0, batch=256, iters=2000)]
    res = sim.run(trace(*jobs), make_policy("sia"))
    first, second = res.jobs
    assert first.reconfigurations >= 1 and first.preemptions == 0
    assert second.first_start_s == pytest.approx(1000.0)


def test_las_preempts_a_long_job_for_a_new_one():
    sim = make_sim([{"gpu": "a100", "nodes": 1, "gpus_per_node": 4}], restore_s=30.0)
    long = job(0, 0.0, iters=50_000, gpus=4, gpu_type="a100-40gb")
    short = job(1, 5000.0, iters=500, gpus=4, gpu_type="a100-40gb")
    res = sim.run(trace(long, short), make_policy("las"))
    a, b = res.jobs
    assert a.preemptions == 1 and b.preemptions == 0
    assert b.first_start_s == pytest.approx(5000.0)  # 20,000 GPU-s attained: long is in Q1
    assert a.finish_s > b.finish_s


def test_las_same_queue_does_not_preempt():
    sim = make_sim([{"gpu": "a100", "nodes": 1, "gpus_per_node": 4}])
    long = job(0, 0.0, iters=50_000, gpus=4, gpu_type="a100-40gb")
    short = job(1, 100.0, iters=500, gpus=4, gpu_type="a100-40gb")  # long still in Q0
    res = sim.run(trace(long, short), make_policy("las", thresholds_gpu_s=(1e9,)))
    assert res.jobs[0].preemptions == 0
    assert res.jobs[1].first_start_s == pytest.approx(res.jobs[0].finish_s)


@pytest.mark.parametrize("name", POLICIES)
def test_dp_oom_jobs_rejected_with_reason(name):
    # BERT-6.7B fits on 8 A100s with pipelining (the simulator admits it), never with pure data
    # parallelism: the DP-informed baselines reject it.
    sim = make_sim([{"gpu": "a100", "nodes": 2, "gpus_per_node": 4}])
    big = job(0, 0.0, model="bert-6.7b", batch=256, iters=10, gpus=8, gpu_type="a100-40gb")
    assert sim.tuner.tune(big.model, big.global_batch).feasible
    small = job(1, 0.0, iters=10, gpus=4, gpu_type="a100-40gb")
    res = sim.run(trace(big, small), make_policy(name))
    assert res.jobs[0].status == "rejected" and "data-parallel" in res.jobs[0].reject_reason
    assert res.jobs[1].status == "finished"


@pytest.mark.parametrize("name", POLICIES)
def test_runs_auto_parallel_plan_with_full_tuning(name):
    sim = make_sim([{"gpu": "a100", "nodes": 2, "gpus_per_node": 4}])
    j = job(0, 0.0, iters=10, gpus=8, gpu_type="a100-40gb", model="bert-2.6b", batch=256)
    (start,) = first_decision(sim, name, [j])
    assert isinstance(start, Start) and start.tuning == "full" and start.constraints is None
    assert start.cell.gpu_type == "a100-40gb" and start.cell.num_gpus == 8
    best = sim.tuner.best_in_layout(j.model, 256, "a100-40gb", start.cell.layout)
    assert best is not None and start.cell.stages == best.plan.pipeline


def test_assign_respects_capacity_limit_and_fifo():
    cap = {"a": 4, "b": 4}
    # Three identical jobs, room for two on "a" and two on "b"; "a" is worth more.
    vals = [{("a", 2): 1.0, ("b", 2): 0.5}] * 3
    assert assign(vals, [False] * 3, cap) == [("a", 2), ("a", 2), ("b", 2)]
    # A running job (must stay somewhere) and at most zero moves of it.
    vals = [{("a", 4): 1.0, ("b", 4): 0.9}, {("a", 4): 1.0, ("b", 4): 0.1}]
    assert assign(vals, [True, False], cap, [{("b", 4)}, set()], limit=0) == [("a", 4), ("b", 4)]
    assert assign(vals, [True, False], cap, [{("b", 4)}, set()], limit=1) == [("b", 4), ("a", 4)]


def test_policy_options_validated():
    with pytest.raises(ValueError):
        make_policy("las", thresholds_gpu_s=(10.0, 5.0))
    with pytest.raises(ValueError):
        make_policy("sia", fairness_p=0.0)
    assert make_policy("gavel", round_s=None).tick_interval_s is None


def test_las_rejects_a_request_the_cluster_cannot_hold():
    sim = make_sim([{"gpu": "a40", "nodes": 1, "gpus_per_node": 2}])
    actions = first_decision(sim, "las", [job(0, 0.0, gpus=4, gpu_type="a40")])
    assert len(actions) == 1 and isinstance(actions[0], Reject)
    assert "absent or too small" in actions[0].reason
