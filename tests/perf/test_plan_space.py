"""The Megatron-LM plan space: interleaving with any virtual-stage count that divides the layers
per stage, fixed plan columns priced even outside the search's options, and the published large
runs (crius_gym/data/published_runs.csv) all feasible (issue 12)."""

from __future__ import annotations

import math

import pytest

from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.calibration import get_calibration
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.framework import get_framework
from crius_gym.perf.measurements import load_published_runs
from crius_gym.perf.plan import Layout, PlanConstraints
from crius_gym.perf.validation import oom_agreement, prediction_table
from crius_gym.workload.models import build_model

MEGATRON = Estimator(get_framework("megatron"), get_calibration("megatron"))
ALPA = Estimator(get_framework("alpa"), get_calibration("alpa"))
MEGATRON_DS = Estimator(get_framework("megatron-deepspeed"), get_calibration("megatron-deepspeed"))
DGX = build_cluster(
    [{"gpu": "a100-80gb", "nodes": 128, "gpus_per_node": 8, "nics_per_node": 8}]
).groups[0]


def gpt_175b():
    values = {"hidden_size": 12288, "num_heads": 96, "num_layers": 96, "seq_len": 2048}
    return build_model("gpt-175b", "gpt", {**values, "vocab_size": 51200, "dtype": "fp16"})


def interleavings(model, stages: int) -> set[int]:
    plans = MEGATRON.plans(model, 1536, Layout(128, 8), stages, 8)
    return {p.interleave for p in plans}


def test_interleaving_tries_every_divisor_of_the_layers_per_stage():
    m = gpt_175b()
    assert interleavings(m, 8) == {1, 2, 3, 4, 6}  # 12 layers per stage, max_interleave 8
    assert interleavings(m, 16) == {1, 2, 3, 6}  # 6 layers per stage
    assert interleavings(m, 1) == {1}  # interleaving needs a pipeline


def test_more_virtual_stages_shrink_the_bubble():
    m = gpt_175b()
    layout = Layout(128, 8)

    def best(v):
        cons = PlanConstraints(
            pipeline=16,
            tensor=8,
            microbatch_size=1,
            interleave=v,
            recompute="full",
            sequence_parallel=False,
            distributed_optimizer=False,
        )
        est, _ = MEGATRON.search(m, 1536, DGX, layout, cons)
        assert est is not None
        return est

    one, three = best(1), best(3)
    # The bubble is (sum of stage times - the slowest) / v; stage traffic grows with v but
    # the slowest stage here is the last one, which sends nothing on.
    assert three.breakdown.bubble_s == pytest.approx(one.breakdown.bubble_s / 3, rel=0.05)
    assert three.iter_time_s < one.iter_time_s
    assert three.memory_gb > one.memory_gb  # more microbatches in flight (1 + (p-1)/(p v))


def test_fixed_plan_columns_outside_the_search_options_are_priced():
    m = gpt_175b()
    # Microbatch size 3 is not among Megatron's searched sizes (1, 2, 4, 8).
    cons = PlanConstraints(pipeline=16, tensor=8, microbatch_size=3)
    est, _ = MEGATRON.search(m, 1536, DGX, Layout(128, 8), cons)
    assert est is not None and est.plan.microbatches == 1536 // (8 * 3)
    # Alpa always runs 16 microbatches unless the measured run says otherwise.
    bert = build_model(
        "bert-1.3b",
        "bert",
        {
            "hidden_size": 2048,
            "num_heads": 32,
            "num_layers": 24,
            "seq_len": 512,
            "vocab_size": 32000,
            "dtype": "fp16",
        },
    )
    v100 = build_cluster([{"gpu": "v100", "nodes": 1, "gpus_per_node": 8}]).groups[0]
    est, _ = ALPA.search(bert, 256, v100, Layout(1, 8), PlanConstraints(microbatch_size=8))
    assert est is not None and est.plan.microbatches * est.plan.data * 8 == 256


def test_published_large_runs_are_feasible():
    rows = load_published_runs()
    assert len(rows) >= 100 and all(m.split == "holdout" for m in rows)
    df = prediction_table(
        rows, {"megatron": MEGATRON, "megatron-deepspeed": MEGATRON_DS, "alpa": ALPA}
    )
    modelled = df[df["unsupported"] == ""]
    missing = modelled[modelled["predicted_iter_time_s"].isna()]
    assert missing.empty, missing[["source", "model_name"]].to_string()
    assert oom_agreement(df)["false_oom"] == 0
    # The rows outside the model are the fixed tensor-parallel degrees wider than a node.
    outside = df[df["unsupported"] != ""]
    assert (outside["tensor_parallel"].astype(int) > outside["gpus_per_node"].astype(int)).all()
    assert not math.isnan(df["error_pct"].abs().mean())


def _exhaustive_best(est, model, batch, group, cell):
    """The fastest feasible plan of ``plans()``, every plan priced (the search's reference)."""
    best = None
    for plan in est.plans(model, batch, cell.layout, cell.stages, group.gpus_per_node):
        e = est.estimate(model, batch, group, cell.layout, plan)
        if e is not None and e.feasible and (best is None or e.iter_time_s < best.iter_time_s):
            best = e
    return best


@pytest.mark.parametrize("framework", ["megatron", "megatron-deepspeed"])
@pytest.mark.parametrize(
    ("name", "batch"), [("gpt-3.6b", 512), ("bert-1.3b", 256), ("moe-1.3b", 512)]
)
def test_chained_search_finds_the_exhaustive_best(framework, name, batch):
    """Dominance chains (recompute none < selective < full, SP off = on in time, the sharded
    optimizer over the unsharded one) change how many plans are priced, never the answer."""
    from crius_gym.perf.cell import Cell
    from crius_gym.workload.models import load_model_catalog

    est = Estimator(get_framework(framework), get_calibration(framework))
    if name == "gpt-3.6b":
        values = {"hidden_size": 3072, "num_heads": 32, "num_layers": 30, "seq_len": 2048}
        model = build_model(name, "gpt", {**values, "vocab_size": 51200, "dtype": "fp16"})
    else:
        model = load_model_catalog().get(name)
    group = build_cluster([{"gpu": "a100-80gb", "nodes": 4, "gpus_per_node": 8}]).groups[0]
    checked = 0
    for layout in (Layout(1, 2), Layout(1, 8), Layout(2, 8), Layout(4, 8)):
        for stages in (1, 2, 4, 8):
            cell = Cell(gpu_type="a100-80gb", layout=layout, stages=stages)
            if layout.num_gpus % stages:
                continue
            best, priced = est.best_plan(model, batch, group, cell)
            ref = _exhaustive_best(est, model, batch, group, cell)
            total = est.count_plans(model, batch, layout, stages, group.gpus_per_node)
            assert priced <= total
            if ref is None:
                assert best is None
                continue
            assert best is not None and best.iter_time_s == ref.iter_time_s
            checked += 1
    assert checked >= 8
