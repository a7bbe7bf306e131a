"""Framework profiles: the Megatron-DeepSpeed profile, borrowed calibrations, gradient bytes."""

import dataclasses

import pytest

from crius_gym.errors import ConfigError
from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.calibration import get_calibration
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.framework import _parse, get_framework, load_frameworks
from crius_gym.perf.plan import Layout, Plan
from crius_gym.workload.models import build_model

GPT = {
    "hidden_size": 3072,
    "num_heads": 32,
    "num_layers": 30,
    "seq_len": 2048,
    "vocab_size": 51200,
}


def test_megatron_deepspeed_uses_megatron_calibration():
    assert get_framework("megatron-deepspeed").calibration == "megatron"
    assert get_calibration("megatron-deepspeed") is get_calibration("megatron")
    # A profile without the key is calibrated as itself.
    assert get_framework("alpa").calibration == "alpa"
    assert {p.calibration for p in load_frameworks().values()} == {"alpa", "megatron"}


@pytest.mark.parametrize(
    ("framework", "dtype", "grad_bytes"),
    [
        ("megatron", "fp16", 4.0),
        ("megatron", "bf16", 4.0),
        ("megatron-deepspeed", "fp16", 2.0),  # DeepSpeed's fp16 optimizer keeps fp16 gradients
        ("megatron-deepspeed", "bf16", 4.0),  # BF16_Optimizer accumulates in fp32
        ("alpa", "fp16", 2.0),
        ("alpa", "fp32", 4.0),
    ],
)
def test_gradient_bytes(framework, dtype, grad_bytes):
    nbytes = 4 if dtype == "fp32" else 2
    assert get_framework(framework).gradient_bytes(dtype, nbytes) == grad_bytes


def test_deepspeed_fp16_halves_the_gradient_all_reduce_and_saves_two_bytes_a_parameter():
    """Same kernels and constants: only the gradient dtype differs for an fp16 model."""
    group = build_cluster([{"gpu": "a100-80gb", "nodes": 8, "gpus_per_node": 8}]).groups[0]
    model = build_model("gpt-3.6b", "gpt", {**GPT, "dtype": "fp16"})
    plan = Plan(1, 64, 1, 1, "full", 1, False, False)
    priced = {}
    for name in ("megatron", "megatron-deepspeed"):
        est = Estimator(get_framework(name), get_calibration(name))
        priced[name] = est.estimate(model, 512, group, Layout(8, 8), plan)
    meg, ds = priced["megatron"], priced["megatron-deepspeed"]
    assert meg is not None and ds is not None
    assert ds.breakdown.grad_sync_s == pytest.approx(meg.breakdown.grad_sync_s / 2, rel=1e-9)
    assert ds.breakdown.compute_s == pytest.approx(meg.breakdown.compute_s, rel=1e-12)
    params = 3.6e9
    assert meg.memory_gb - ds.memory_gb == pytest.approx(2 * params / 1e9, rel=0.05)


def test_deepspeed_profile_searches_plain_1f1b_without_sequence_parallelism():
    est = Estimator(get_framework("megatron-deepspeed"), get_calibration("megatron-deepspeed"))
    model = build_model("gpt-3.6b", "gpt", {**GPT, "dtype": "fp16"})
    plans = list(est.plans(model, 512, Layout(2, 8), 2, 8))
    assert plans and {p.interleave for p in plans} == {1}
    assert not any(p.sequence_parallel for p in plans)
    assert {p.recompute for p in plans} == {"full", "none"}


def test_fp32_main_grads_must_be_a_boolean_or_a_dtype_list():
    entry = dict(
        microbatches=None,
        microbatch_sizes=[1],
        recompute_options=["full"],
        max_interleave=1,
        distributed_optimizer_options=[False],
        usable_memory_fraction=0.9,
        memory_overhead_gb=1.0,
        partition="even_layers",
    )
    assert _parse("x", {**entry, "fp32_main_grads": True}).fp32_grad_dtypes == ("fp16", "bf16")
    assert _parse("x", {**entry, "fp32_main_grads": ["bf16"]}).fp32_grad_dtypes == ("bf16",)
    with pytest.raises(ConfigError, match="fp32_main_grads"):
        _parse("x", {**entry, "fp32_main_grads": "yes"})
    with pytest.raises(ConfigError, match="not 16-bit"):
        _parse("x", {**entry, "fp32_main_grads": ["fp32"]})
    assert dataclasses.replace(get_framework("megatron"), name="y").calibration == "megatron"
