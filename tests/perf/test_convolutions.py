"""Wide-ResNet under Alpa: kernel occupancy floor, per-microbatch convolution gradient sync,
cross-stage transfers that do not overlap compute (docs/estimator.md, "Convolutions under
Alpa")."""

import dataclasses

import pytest

from crius_gym.errors import ConfigError
from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.calibration import Calibration, GPUCalibration, parse_calibration
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.fit import default_parameters
from crius_gym.perf.framework import _parse, get_framework
from crius_gym.perf.layers import model_costs
from crius_gym.perf.measurements import parse_measurement_row
from crius_gym.perf.plan import Layout, Plan
from crius_gym.workload.models import load_model_catalog

CAT = load_model_catalog()
WRN = CAT.get("wide_resnet-1b")


def group(gpu="a100", nodes=1, gpn=4):
    return build_cluster([{"gpu": gpu, "nodes": nodes, "gpus_per_node": gpn}]).groups[0]


def flat(wave: float = 0.0) -> Calibration:
    """Flat efficiency, no memory-traffic term: compute is exact algebra."""
    return Calibration(
        framework="alpa",
        gpus={},
        default_gpu=GPUCalibration(eta_max=0.5, work_half_gflop=0.0, inter_node_efficiency=0.5),
        intra_link_efficiency=0.5,
        wave_elements=wave,
    )


def test_wide_resnet_layers_list_their_convolutions():
    costs = model_costs(WRN)
    assert all(x.kernels for x in costs.layers)  # stem, 16 bottleneck blocks, classifier
    for x in costs.layers:
        assert sum(f for f, _ in x.kernels) == pytest.approx(x.flops, rel=1e-12)
    # First block of stage 0: 1×1 (320 → 320), 3×3 (320 → 640), 1×1 (640 → 1280), projection
    # (320 → 1280): 2·C_in·k² FLOPs per output element.
    block = costs.layers[1]
    assert [s for _, s in block.kernels] == [2 * 320, 2 * 9 * 320, 2 * 640, 2 * 320]
    # Transformers keep the work curve.
    assert not any(x.kernels for x in model_costs(CAT.get("bert-1.3b")).layers)


def test_occupancy_floor_slows_kernels_with_few_outputs_per_gpu():
    g = group(nodes=1, gpn=1)
    plan = Plan(1, 1, 1, 16, "full")
    costs = model_costs(WRN)
    f_rc = sum(x.flops for x in costs.layers if x.recomputed)
    f_head = sum(x.flops for x in costs.layers if not x.recomputed)
    peak = g.gpu.peak_flops("fp32") * 0.5
    no_floor = Estimator(get_framework("alpa"), flat(0.0))
    est = no_floor.estimate(WRN, 256, g, Layout(1, 1), plan)
    assert est.breakdown.compute_s == pytest.approx((4 * f_rc + 3 * f_head) * 256 / peak, rel=1e-9)
    # A wave of 2M outputs: 1 image per microbatch leaves the late 7×7 convolutions short of a
    # wave (slower per image), 16 images fill them.
    floor = Estimator(get_framework("alpa"), flat(2e6))
    per_image = [
        floor.estimate(WRN, b, g, Layout(1, 1), plan).breakdown.compute_s / b for b in (16, 256)
    ]
    assert per_image[0] > 1.5 * per_image[1]
    assert per_image[1] == pytest.approx(est.breakdown.compute_s / 256, rel=0.05)
    # Far below a wave every kernel costs one wave whatever the batch.
    huge = Estimator(get_framework("alpa"), flat(1e12))
    c = [huge.estimate(WRN, b, g, Layout(1, 1), plan).breakdown.compute_s for b in (16, 32)]
    assert c[0] == pytest.approx(c[1], rel=1e-12)


def test_convolution_gradients_are_synchronised_every_microbatch():
    alpa = get_framework("alpa")
    assert alpa.microbatch_grad_sync == ("conv",)
    once = dataclasses.replace(alpa, microbatch_grad_sync=())
    cal = flat(0.0)
    g, lay = group(), Layout(1, 4)
    plan = Plan(1, 4, 1, 16, "full")
    every = Estimator(alpa, cal).estimate(WRN, 256, g, lay, plan)
    end = Estimator(once, cal).estimate(WRN, 256, g, lay, plan)
    conv = sum(x.params for x in model_costs(WRN).layers if x.kind == "conv")
    one_sync = 2 * 3 / 4 * conv * 4 / (g.intra_link.bandwidth_gbps * 1e9 * 0.5)
    assert every.iter_time_s - end.iter_time_s == pytest.approx(15 * one_sync, rel=1e-9)
    assert every.breakdown.total_s == pytest.approx(every.iter_time_s, rel=1e-12)
    # Without data parallelism there is nothing to synchronise.
    solo = Plan(4, 1, 1, 16, "full")
    assert Estimator(alpa, cal).estimate(WRN, 256, g, lay, solo).iter_time_s == pytest.approx(
        Estimator(once, cal).estimate(WRN, 256, g, lay, solo).iter_time_s, rel=1e-12
    )
    # Transformer gradients still synchronise once per iteration.
    bert = CAT.get("bert-1.3b")
    assert Estimator(alpa, cal).estimate(bert, 256, g, lay, plan).iter_time_s == pytest.approx(
        Estimator(once, cal).estimate(bert, 256, g, lay, plan).iter_time_s, rel=1e-12
    )


def test_alpa_cross_stage_transfers_do_not_overlap_compute():
    alpa = get_framework("alpa")
    assert not alpa.cross_stage_overlap and get_framework("megatron").cross_stage_overlap
    overlapped = dataclasses.replace(alpa, cross_stage_overlap=True)
    cal = flat(0.0)
    g = group(gpu="a40", nodes=4, gpn=2)
    lay = Layout(4, 2)
    for plan in (Plan(4, 2, 1, 16, "full"), Plan(8, 1, 1, 16, "full")):
        serial = Estimator(alpa, cal).estimate(WRN, 256, g, lay, plan)
        over = Estimator(overlapped, cal).estimate(WRN, 256, g, lay, plan)
        assert serial.iter_time_s > over.iter_time_s
        assert serial.breakdown.total_s == pytest.approx(serial.iter_time_s, rel=1e-12)
        # m·max c + m·max x + the two fills: never more than the transfers apart.
        assert serial.iter_time_s <= over.iter_time_s + serial.breakdown.cross_stage_comm_s * (
            1 + plan.pipeline / 16
        )
    one = Plan(1, 8, 1, 16, "full")
    assert Estimator(alpa, cal).estimate(WRN, 256, g, lay, one).iter_time_s == pytest.approx(
        Estimator(overlapped, cal).estimate(WRN, 256, g, lay, one).iter_time_s, rel=1e-12
    )


def test_profile_rejects_unknown_layer_kinds():
    entry = {
        "microbatches": 16,
        "recompute_options": ["full"],
        "max_interleave": 1,
        "distributed_optimizer_options": [True],
        "fp32_main_grads": False,
        "usable_memory_fraction": 0.8,
        "memory_overhead_gb": 0.75,
        "partition": "balanced",
    }
    assert _parse("x", {**entry, "microbatch_grad_sync": ["conv"]}).microbatch_grad_sync == (
        "conv",
    )
    with pytest.raises(ConfigError, match="microbatch_grad_sync"):
        _parse("x", {**entry, "microbatch_grad_sync": ["convolution"]})


def test_wave_size_is_calibrated_and_replaces_the_wide_resnet_work_scale():
    base = {"framework": "alpa", "split": "calibration", "gpu_type": "a100"}
    base |= {"num_nodes": "1", "gpus_per_node": "1", "global_batch": "256"}
    base |= {"measured_iter_time_s": "1"}
    rows = [
        parse_measurement_row(
            {
                **base,
                "model_family": "wide_resnet",
                "dtype": "fp32",
                "resnet_layers": "50",
                "width_factor": "2",
                "num_channels": "320",
                "image_size": "224",
                "num_classes": "1024",
            },
            "synthetic",
            2,
        ),
        parse_measurement_row(
            {
                **base,
                "model_family": "moe",
                "dtype": "fp16",
                "seq_len": "1024",
                "hidden_size": "1024",
                "num_layers": "16",
                "num_heads": "16",
                "vocab_size": "32000",
                "num_experts": "16",
                "expert_group_size": "2048",
            },
            "synthetic",
            3,
        ),
    ]
    names = {p.name for p in default_parameters("alpa", rows)}  # MoE is the reference family
    assert {"wave_elements", "family.wide_resnet"} <= names
    assert "work_scale.wide_resnet" not in names
    assert "wave_elements" not in {p.name for p in default_parameters("alpa", rows[1:])}
    cal = dataclasses.replace(flat(3.5e6), family_efficiency={"wide_resnet": 0.9})
    assert parse_calibration("alpa", cal.to_dict()).wave_elements == 3.5e6
    with pytest.raises(ConfigError):
        flat(-1.0)
