"""Activation memory per recomputation mode and sequence parallelism (Korthikanti et al. 2022).

Known answers: Korthikanti et al. 2022 (arXiv 2205.05198) Fig. 1 gives the activation memory
per GPU of their 22B (h 6144, a 64, 48 layers, microbatch 4) and 1T (h 25600, a 160, 128 layers,
microbatch 1) GPT models at TP 8, s 2048: 59.25 / 131.25 GiB with no recomputation and
9.56 / 26.56 GiB with sequence parallelism and selective recomputation. With 1F1B the first stage
holds p microbatches of l/p layers, so the figure is l × the per-layer bytes (Table 2).
"""

from __future__ import annotations

import pytest

from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.calibration import get_calibration
from crius_gym.perf.estimator import Estimator, stage_costs, stored_activation_bytes
from crius_gym.perf.framework import get_framework
from crius_gym.perf.layers import model_costs
from crius_gym.perf.measurements import read_measurements, write_measurements_csv
from crius_gym.perf.plan import Layout, Plan
from crius_gym.workload.models import build_model

GIB = 2**30
MEGATRON = get_framework("megatron")
#: Four DGX A100 80 GB nodes (8 GPUs, 8 HDR NICs each), all of them in one layout.
DGX_X4 = build_cluster(
    [{"gpu": "a100-80gb", "nodes": 4, "gpus_per_node": 8, "nics_per_node": 8}]
).groups[0]
DGX_LAYOUT = Layout(4, 8)


def gpt(h: int, a: int, layers: int):
    values = {"hidden_size": h, "num_heads": a, "num_layers": layers, "seq_len": 2048}
    return build_model(f"gpt-h{h}", "gpt", {**values, "vocab_size": 51200, "dtype": "fp16"})


def per_layer_gib(model, stages: int, microbatch: int, recompute, sp: bool, t: int = 8):
    """Stored bytes of one middle stage's layer × every layer (Fig. 1's first-stage figure)."""
    st = stage_costs(model, MEGATRON, stages)[1]  # a middle stage: transformer layers only
    per_layer = stored_activation_bytes(st, t, recompute, sp) / st.layers
    return per_layer * model.num_layers * microbatch / GIB


@pytest.mark.parametrize(
    ("h", "a", "layers", "stages", "b", "none_gib", "seq_sel_gib"),
    [(6144, 64, 48, 8, 4, 59.25, 9.56), (25600, 160, 128, 64, 1, 131.25, 26.56)],
)
def test_korthikanti_figure_1(h, a, layers, stages, b, none_gib, seq_sel_gib):
    m = gpt(h, a, layers)
    assert per_layer_gib(m, stages, b, "none", False) == pytest.approx(none_gib, abs=0.01)
    assert per_layer_gib(m, stages, b, "selective", True) == pytest.approx(seq_sel_gib, abs=0.01)


def test_each_mode_against_table_2_by_hand():
    s, h, a, t = 2048, 6144, 64, 8
    m = gpt(h, a, 48)
    st = stage_costs(m, MEGATRON, 8)[1]
    layer = {  # Korthikanti Table 2, bytes per layer and sample (16-bit)
        ("none", False): s * h * (10 + 24 / t + 5 * a * s / (h * t)),
        ("none", True): s * h * (34 + 5 * a * s / h) / t,
        ("selective", False): s * h * (10 + 24 / t),
        ("selective", True): 34 * s * h / t,
        ("full", False): 2 * s * h,
        ("full", True): 2 * s * h / t,
    }
    for (mode, sp), want in layer.items():
        got = stored_activation_bytes(st, t, mode, sp) / st.layers
        assert got == pytest.approx(want, rel=1e-9), (mode, sp)


def test_selective_and_sequence_parallel_move_the_estimate_the_documented_way():
    m, g, est, layout = (
        gpt(6144, 64, 48),
        DGX_X4,
        Estimator(MEGATRON, get_calibration("megatron")),
        DGX_LAYOUT,
    )

    def run(rc: str, sp: bool):
        return est.estimate(m, 64, g, layout, Plan(4, 1, 8, 16, rc, 1, sp))

    none, sel, full = run("none", False), run("selective", False), run("full", False)
    # Time: none < selective < full (selective re-runs the attention core only).
    assert none.iter_time_s < sel.iter_time_s < full.iter_time_s
    assert (sel.iter_time_s - none.iter_time_s) < 0.2 * (full.iter_time_s - none.iter_time_s)
    # Memory: full < selective < none; sequence parallelism lowers every mode's activations.
    assert full.memory_gb < sel.memory_gb < none.memory_gb
    for rc in ("none", "selective", "full"):
        assert run(rc, True).memory_gb < run(rc, False).memory_gb
        assert run(rc, True).iter_time_s == pytest.approx(run(rc, False).iter_time_s)


def test_a_selective_recompute_row_is_parsed_and_estimated(tmp_path):
    row = {
        "model_family": "gpt",
        "model_name": "gpt-22b",
        "hidden_size": "6144",
        "num_layers": "48",
        "num_heads": "64",
        "seq_len": "2048",
        "vocab_size": "51200",
        "dtype": "fp16",
        "global_batch": "64",
        "gpu_type": "a100-80gb",
        "num_nodes": "1",
        "gpus_per_node": "8",
        "tensor_parallel": "8",
        "pipeline_parallel": "1",
        "microbatch_size": "4",
        "activation_recompute": "selective",
        "sequence_parallel": "true",
        "framework": "megatron",
        "measured_iter_time_s": "10.0",
        "nics_per_node": "8",
    }
    path = tmp_path / "sel.csv"
    write_measurements_csv([row, {**row, "activation_recompute": "false"}], path)
    sel, none = read_measurements(path)
    assert sel.recompute == "selective" and sel.sequence_parallel is True
    assert none.recompute == "none"
    from crius_gym.perf.fit import predict

    est = Estimator(MEGATRON, get_calibration("megatron"))
    best = predict(est, sel)
    assert best is not None and best.plan.recompute == "selective" and best.plan.sequence_parallel
    bad = tmp_path / "bad.csv"
    write_measurements_csv([{**row, "activation_recompute": "partial"}], bad)
    with pytest.raises(Exception, match="activation_recompute") as info:
        read_measurements(bad)
    assert "bad.csv" in str(info.value) and "selective" in str(info.value)


def test_distributed_optimizer_shards_the_optimizer_states():
    """Megatron-LM README: 18 bytes per parameter without it, 6 + 12/d with it (fp32 grads)."""
    m, g, est, layout = (
        gpt(6144, 64, 48),
        DGX_X4,
        Estimator(MEGATRON, get_calibration("megatron")),
        DGX_LAYOUT,
    )
    base = {"pipeline": 1, "data": 4, "tensor": 8, "microbatches": 16, "recompute": "full"}
    plain = est.estimate(m, 64, g, layout, Plan(**base))
    sharded = est.estimate(m, 64, g, layout, Plan(**base, distributed_optimizer=True))
    params_per_gpu = sum(x.params for x in model_costs(m).layers) / 8
    saved_gb = (plain.memory_gb - sharded.memory_gb) * 1e9
    assert saved_gb == pytest.approx(params_per_gpu * 12 * (1 - 1 / 4), rel=1e-6)
    assert sharded.iter_time_s < plain.iter_time_s  # the optimizer step runs on 1/d
    plans = list(est.plans(m, 64, layout, 1, 8))
    assert {p.distributed_optimizer for p in plans if p.data > 1} == {False, True}
    assert not any(p.distributed_optimizer for p in plans if p.data == 1)
