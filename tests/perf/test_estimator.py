import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.cell import Cell
from crius_gym.perf.estimator import OPTIMIZER_STEP_BYTES
from crius_gym.perf.layers import model_costs
from crius_gym.perf.plan import Layout, Plan, PlanConstraints
from crius_gym.workload.models import load_model_catalog

CAT = load_model_catalog()


def group(gpu="a100", nodes=4, gpn=4, inter="ib-hdr"):
    return build_cluster(
        [{"gpu": gpu, "nodes": nodes, "gpus_per_node": gpn, "inter_link": inter}]
    ).groups[0]


def test_single_gpu_known_answer(linear_alpa):
    """One GPU, no parallelism: T = (4·F_rc + 3·F_head)·B / (peak·η) + optimizer step."""
    m = CAT.get("bert-760m")
    g = group(nodes=1, gpn=1)
    est = linear_alpa.estimate(m, 128, g, Layout(1, 1), Plan(1, 1, 1, 16, "full"))
    costs = model_costs(m)
    f_rc = sum(x.flops for x in costs.layers if x.recomputed)
    f_head = sum(x.flops for x in costs.layers if not x.recomputed)
    compute = (4 * f_rc + 3 * f_head) * 128 / (312e12 * 0.5)
    opt = costs.params * OPTIMIZER_STEP_BYTES["adamw"] / 1555e9
    assert est.iter_time_s == pytest.approx(compute + opt, rel=1e-9)
    assert est.breakdown.compute_s == pytest.approx(compute, rel=1e-9)
    assert est.breakdown.grad_sync_s == 0 and est.breakdown.bubble_s == 0


def test_compute_time_linear_in_batch(linear_alpa, alpa):
    m = CAT.get("bert-1.3b")
    g = group()
    plan = Plan(2, 2, 2, 16, "full")
    t = [
        linear_alpa.estimate(m, b, g, Layout(2, 4), plan).breakdown.compute_s
        for b in (128, 256, 512)
    ]
    assert t[1] == pytest.approx(2 * t[0], rel=1e-9)
    assert t[2] == pytest.approx(4 * t[0], rel=1e-9)
    # With the fitted (saturating) efficiency, bigger batches are at most linearly slower.
    c = [alpa.estimate(m, b, g, Layout(2, 4), plan).breakdown.compute_s for b in (128, 256)]
    assert c[0] < c[1] <= 2 * c[0] * (1 + 1e-9)


@pytest.mark.parametrize("name", ["bert-2.6b", "moe-2.4b", "wide_resnet-2b", "gpt-7.5b"])
def test_breakdown_sums_to_iteration_time(alpa, name):
    m = CAT.get(name)
    g = group()
    for plan in alpa.plans(m, 256, Layout(4, 4), 4, 4):
        est = alpa.estimate(m, 256, g, Layout(4, 4), plan)
        assert est.breakdown.total_s == pytest.approx(est.iter_time_s, rel=1e-12)


def test_memory_falls_with_tensor_and_pipeline_parallelism(alpa):
    m = CAT.get("bert-6.7b")
    g = group()
    lay = Layout(2, 4)
    mem_t = [alpa.estimate(m, 256, g, lay, Plan(1, 8 // t, t, 16)).memory_gb for t in (1, 2, 4)]
    assert mem_t[0] > mem_t[1] > mem_t[2]
    # More stages at the same data parallelism (more GPUs): each holds fewer layers.
    mem_p = [alpa.estimate(m, 256, g, Layout(p, 2), Plan(p, 2, 1, 16)).memory_gb for p in (1, 2, 4)]
    assert mem_p[0] > mem_p[1] > mem_p[2]


def test_recomputation_trades_time_for_memory(megatron):
    m = CAT.get("gpt-7.5b")
    g = build_cluster(
        [{"gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 8, "nics_per_node": 8}]
    ).groups[0]
    rc = megatron.estimate(m, 64, g, Layout(2, 8), Plan(2, 2, 4, 16, "full"))
    no = megatron.estimate(m, 64, g, Layout(2, 8), Plan(2, 2, 4, 16, "none"))
    assert rc.memory_gb < no.memory_gb
    assert rc.iter_time_s > no.iter_time_s


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(["bert-760m", "bert-2.6b", "moe-1.3b", "wide_resnet-1b"]),
    batch=st.sampled_from([128, 256, 512]),
    layout=st.sampled_from([Layout(1, 4), Layout(2, 2), Layout(2, 4), Layout(4, 2)]),
    slow=st.sampled_from(["eth-10g", "eth-25g", "ib-edr"]),
)
def test_slower_link_never_makes_a_plan_faster(alpa, name, batch, layout, slow):
    m = CAT.get(name)
    fast_g = group(nodes=4, gpn=4, inter="ib-ndr")
    slow_g = dataclasses.replace(fast_g, inter_link=group(inter=slow).inter_link)
    slow_intra = dataclasses.replace(fast_g, intra_link=group(gpu="a10").intra_link)
    for p in (1, 2):
        for plan in alpa.plans(m, batch, layout, p, 4):
            fast = alpa.estimate(m, batch, fast_g, layout, plan)
            assert alpa.estimate(m, batch, slow_g, layout, plan).iter_time_s >= fast.iter_time_s
            assert alpa.estimate(m, batch, slow_intra, layout, plan).iter_time_s >= (
                fast.iter_time_s
            )


def test_infeasible_plans_are_rejected(alpa):
    g = group(gpu="a10", nodes=1, gpn=1)
    best, count = alpa.best_plan(CAT.get("bert-6.7b"), 256, g, Cell("a10", Layout(1, 1), 1))
    assert best is None and count > 0
    # Measured in the Arena table: BERT-760M, batch 128, on one A40 (13.5 s).
    g40 = group(gpu="a40", nodes=1, gpn=1)
    best, _ = alpa.best_plan(CAT.get("bert-760m"), 128, g40, Cell("a40", Layout(1, 1), 1))
    assert best is not None and best.feasible


def test_plan_space_respects_cell_rules(alpa, megatron):
    m = CAT.get("bert-1.3b")  # 32 heads
    plans = list(alpa.plans(m, 256, Layout(2, 4), 2, 4))
    assert plans and all(p.num_gpus == 8 and p.pipeline == 2 for p in plans)
    assert all(p.tensor <= 4 for p in plans)  # tensor parallelism stays inside a node
    assert all(p.microbatches == 16 for p in plans)  # Alpa runs 16 microbatches
    assert not list(alpa.plans(m, 256, Layout(2, 4), 3, 4))  # stages must divide the GPUs
    mp = list(megatron.plans(CAT.get("gpt-1.7b"), 512, Layout(4, 8), 1, 8))
    assert {p.recompute for p in mp} == {"full", "selective", "none"}
    assert {p.sequence_parallel for p in mp} == {False, True}
    assert all(p.tensor > 1 for p in mp if p.sequence_parallel)
    assert all(512 % (p.data * p.microbatches) == 0 for p in mp)


def test_search_with_constraints(alpa):
    m = CAT.get("bert-1.3b")
    g = group()
    dp_only, n_dp = alpa.search(m, 256, g, Layout(1, 4), PlanConstraints(pipeline=1, tensor=1))
    free, n_free = alpa.search(m, 256, g, Layout(1, 4))
    assert dp_only is not None and dp_only.plan.pipeline == 1 and dp_only.plan.tensor == 1
    assert free is not None and free.iter_time_s <= dp_only.iter_time_s
    assert n_free > n_dp
