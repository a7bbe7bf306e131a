"""The synthetic generator: determinism, splits, distributions, validation, fitted defaults."""

from __future__ import annotations

import math
import random
import re
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest

from crius_gym import datasets
from crius_gym.errors import ConfigError, UnknownNameError
from crius_gym.workload.arena_trace import load_arena_trace
from crius_gym.workload.synthetic import (
    SyntheticConfig,
    cluster_type_weights,
    fit_synthetic_config,
    generate,
    interarrival_for_load,
    interarrival_gaps,
    split_rng,
    split_traces,
)
from tests.conftest import REPO, require_data

ARENA_TYPES = ["a100", "v100", "a40", "a10"]


def signature(trace):
    """Everything random about a trace, comparable across traces with different names."""
    return [
        (
            j.arrival_s,
            j.model.name,
            j.global_batch,
            j.iterations,
            j.requested_gpus,
            j.requested_gpu_type,
        )
        for j in trace.jobs
    ]


def normalised(pairs):
    total = sum(w for _, w in pairs)
    return {k: w / total for k, w in pairs}


def test_same_seed_same_trace_different_seed_differs():
    cfg = SyntheticConfig(num_jobs=200)
    a = generate(cfg, np.random.default_rng(7), ARENA_TYPES)
    b = generate(cfg, np.random.default_rng(7), ARENA_TYPES)
    c = generate(cfg, np.random.default_rng(8), ARENA_TYPES)
    assert a == b
    assert signature(a) != signature(c)
    assert len(a) == 200 and a.name == "synthetic"
    assert [j.job_id for j in a.jobs[:2]] == ["synthetic-00000", "synthetic-00001"]
    assert a.jobs[0].arrival_s == 0.0
    assert all(j.deadline_s is None for j in a.jobs)


def test_generator_is_advanced_and_global_state_untouched():
    cfg = SyntheticConfig(num_jobs=50)
    rng = np.random.default_rng(3)
    # The legacy global state is inspected on purpose: generation must not touch it.
    np_state = np.random.get_state()[1].copy()  # noqa: NPY002
    py_state = random.getstate()
    first = generate(cfg, rng, ARENA_TYPES)
    second = generate(cfg, rng, ARENA_TYPES)
    assert signature(first) != signature(second)
    assert (np.random.get_state()[1] == np_state).all()  # noqa: NPY002
    assert random.getstate() == py_state


def test_distributions_match_config():
    cfg = SyntheticConfig(num_jobs=20_000)
    trace = generate(cfg, np.random.default_rng(2024), ARENA_TYPES)
    n = len(trace)
    models = Counter(j.model.name for j in trace.jobs)
    for name, p in normalised(cfg.model_mix).items():
        assert models[name] / n == pytest.approx(p, abs=0.015), name
    for family, choices in cfg.batch_choices:
        batches = Counter(j.global_batch for j in trace.jobs if j.model.family == family)
        total = sum(batches.values())
        for batch, p in normalised(choices).items():
            assert batches[batch] / total == pytest.approx(p, abs=0.03), (family, batch)
    gpus = Counter(j.requested_gpus for j in trace.jobs)
    for count, p in normalised(cfg.gpu_request).items():
        assert gpus[count] / n == pytest.approx(p, abs=0.015), count
    types = Counter(j.requested_gpu_type for j in trace.jobs)
    for gpu, p in normalised(cfg.gpu_type_weights).items():
        assert types[gpu] / n == pytest.approx(p, abs=0.015), gpu
    logs = np.log([j.iterations for j in trace.jobs])
    assert logs.mean() == pytest.approx(cfg.iterations_log_mu, abs=0.05)
    assert logs.std() == pytest.approx(cfg.iterations_log_sigma, abs=0.05)
    iters = [j.iterations for j in trace.jobs]
    assert cfg.iterations_min <= min(iters) and max(iters) <= cfg.iterations_max
    gaps = np.diff([j.arrival_s for j in trace.jobs])
    assert gaps.mean() == pytest.approx(cfg.mean_interarrival_s, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.05)  # exponential gaps


def test_iterations_are_clipped():
    cfg = SyntheticConfig(
        num_jobs=500, iterations_log_sigma=5.0, iterations_min=100, iterations_max=1000
    )
    iters = [j.iterations for j in generate(cfg, np.random.default_rng(0), ARENA_TYPES).jobs]
    assert min(iters) == 100 and max(iters) == 1000


def test_gpu_types_restricted_to_the_cluster_and_renormalised():
    cfg = SyntheticConfig(num_jobs=4000)
    trace = generate(cfg, np.random.default_rng(1), ["a40", "h100", "a100"])
    types = Counter(j.requested_gpu_type for j in trace.jobs)
    # h100 is absent from the Philly weights: weight 0. "a100" is an alias of a100-40gb.
    assert set(types) == {"a40", "a100-40gb"}
    assert types["a40"] / len(trace) == pytest.approx(784 / (784 + 352), abs=0.03)
    assert cluster_type_weights(cfg, ["a40", "h100"]) == {"a40": 1.0, "h100-sxm": 0.0}


def test_empty_type_weights_mean_uniform_and_all_zero_is_an_error():
    uniform = SyntheticConfig(num_jobs=10, gpu_type_weights=())
    assert cluster_type_weights(uniform, ["h100", "l4"]) == {"h100-sxm": 0.5, "l4": 0.5}
    with pytest.raises(ConfigError, match="gpu_type_weights"):
        generate(SyntheticConfig(num_jobs=10), np.random.default_rng(0), ["h100"])
    with pytest.raises(ConfigError, match="gpu_type_weights"):
        generate(SyntheticConfig(num_jobs=10), np.random.default_rng(0), [])


def test_switching_requests_off_leaves_other_attributes_unchanged():
    cfg = SyntheticConfig(num_jobs=300)
    full = generate(cfg, np.random.default_rng(5), ARENA_TYPES)
    bare = generate(
        SyntheticConfig(num_jobs=300, request_types=False, request_gpus=False),
        np.random.default_rng(5),
        [],
    )
    assert all(j.requested_gpus is None and j.requested_gpu_type is None for j in bare.jobs)
    assert [s[:4] for s in signature(bare)] == [s[:4] for s in signature(full)]
    # Another cluster changes the requested types only.
    other = generate(cfg, np.random.default_rng(5), ["a10", "a40"])
    assert [s[:5] for s in signature(other)] == [s[:5] for s in signature(full)]


def test_replay_resamples_and_rescales_gaps():
    cfg = SyntheticConfig(
        num_jobs=400, arrival="replay", replay_gaps_s=(10.0, 30.0), mean_interarrival_s=20.0
    )
    gaps = np.diff([j.arrival_s for j in generate(cfg, np.random.default_rng(0), ["a40"]).jobs])
    assert set(np.round(gaps, 9)) == {10.0, 30.0}
    doubled = SyntheticConfig(
        num_jobs=400, arrival="replay", replay_gaps_s=(10.0, 30.0), mean_interarrival_s=40.0
    )
    gaps2 = np.diff(
        [j.arrival_s for j in generate(doubled, np.random.default_rng(0), ["a40"]).jobs]
    )
    np.testing.assert_allclose(gaps2, 2 * gaps)


def test_replay_of_the_philly_gaps():
    require_data(datasets.ARENA_TRACES["philly"])
    philly = load_arena_trace("philly")
    pool = interarrival_gaps(philly)
    assert len(pool) == 1937
    cfg = SyntheticConfig(num_jobs=3000, arrival="replay", replay_gaps_s=pool)
    gaps = np.diff([j.arrival_s for j in generate(cfg, np.random.default_rng(9), ["a40"]).jobs])
    # The default mean is the pool's mean, so gaps are replayed unscaled.
    assert set(np.round(gaps, 6)) <= set(np.round(pool, 6))
    assert gaps.std() / gaps.mean() > 2.0  # bursty, unlike Poisson


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"num_jobs": 0}, "num_jobs"),
        ({"num_jobs": 2.5}, "num_jobs"),
        ({"mean_interarrival_s": 0.0}, "mean_interarrival_s"),
        ({"mean_interarrival_s": "fast"}, "mean_interarrival_s"),
        ({"arrival": "bursty"}, "arrival"),
        ({"arrival": "replay"}, "replay_gaps_s"),
        ({"arrival": "replay", "replay_gaps_s": (0.0, 0.0)}, "replay_gaps_s"),
        ({"arrival": "replay", "replay_gaps_s": (-1.0, 2.0)}, "replay_gaps_s"),
        ({"model_mix": ()}, "model_mix"),
        ({"model_mix": (("bert-1.3b", -1.0),)}, "model_mix"),
        ({"model_mix": (("bert-1.3b", 0.0),)}, "model_mix"),
        ({"model_mix": (("bert-1.3b", 1.0), ("bert-1.3b", 2.0))}, "model_mix"),
        ({"model_mix": (("bert-1.3b", 1.0, 3),)}, "model_mix"),
        ({"batch_choices": ()}, "batch_choices"),
        ({"batch_choices": (("bert", ((0, 1.0),)),)}, "batch_choices[bert]"),
        ({"batch_choices": (("bert", ()),)}, "batch_choices[bert]"),
        ({"gpu_request": ((3, 1.0),)}, "gpu_request"),
        ({"gpu_request": ((0, 1.0),)}, "gpu_request"),
        ({"gpu_request": ((4, float("nan")),)}, "gpu_request"),
        ({"gpu_type_weights": (("a40", True),)}, "gpu_type_weights"),
        ({"iterations_log_sigma": -1.0}, "iterations_log_sigma"),
        ({"iterations_log_mu": float("inf")}, "iterations_log_mu"),
        ({"iterations_min": 0}, "iterations_min"),
        ({"iterations_min": 10, "iterations_max": 5}, "iterations_max"),
    ],
)
def test_config_validation_names_the_field(kwargs, field):
    with pytest.raises(ConfigError, match=rf"SyntheticConfig\.{re.escape(field)}:"):
        SyntheticConfig(**kwargs)


def test_generation_errors_name_the_model_or_family():
    with pytest.raises(UnknownNameError, match="resnet-9000"):
        generate(
            SyntheticConfig(model_mix=(("resnet-9000", 1.0),)),
            np.random.default_rng(0),
            ARENA_TYPES,
        )
    only_bert = SyntheticConfig(batch_choices=(("bert", ((128, 1.0),)),))
    with pytest.raises(ConfigError, match="batch_choices: no entry for family 'moe'"):
        generate(only_bert, np.random.default_rng(0), ARENA_TYPES)


def test_mappings_are_accepted_and_round_trip():
    cfg = SyntheticConfig.from_mapping(
        {
            "num_jobs": 10,
            "model_mix": {"bert__760M": 1, "moe-690m": 3},
            "batch_choices": {"bert": {128: 1}, "moe": [[256, 2], [512, 1]]},
            "gpu_request": {np.int64(4): np.float64(1.0)},
            "gpu_type_weights": {},
        }
    )
    assert cfg.model_mix == (("bert__760M", 1.0), ("moe-690m", 3.0))
    assert cfg.batch_choices == (("bert", ((128, 1.0),)), ("moe", ((256, 2.0), (512, 1.0))))
    assert cfg.gpu_request == ((4, 1.0),) and type(cfg.gpu_request[0][0]) is int
    hash(cfg)
    assert SyntheticConfig.from_mapping(cfg.to_dict()) == cfg
    trace = generate(cfg, np.random.default_rng(0), ["a10"])
    assert {j.model.name for j in trace.jobs} <= {"bert-760m", "moe-690m"}
    with pytest.raises(ConfigError, match=r"unknown key.*num_gpus"):
        SyntheticConfig.from_mapping({"num_gpus": 3})


def test_interarrival_for_load():
    gap = interarrival_for_load(0.5, 100, 1000.0)
    assert gap == pytest.approx(20.0)
    # Offered load = arrival rate × GPU-seconds per job / GPUs.
    assert (1 / gap) * 1000.0 / 100 == pytest.approx(0.5)
    assert interarrival_for_load(1.0, 1280, 3600.0 * 8) == pytest.approx(22.5)
    for args in [(0.0, 10, 1.0), (1.0, 0, 1.0), (1.0, 10, -1.0), (math.inf, 10, 1.0)]:
        with pytest.raises(ConfigError):
            interarrival_for_load(*args)


def test_split_rng_streams():
    draws = {
        (split, index): split_rng(11, split, index).random(4).tolist()
        for split in ("train", "val", "test")
        for index in range(3)
    }
    assert len({tuple(v) for v in draws.values()}) == 9
    assert split_rng(11, "val", 2).random(4).tolist() == draws["val", 2]
    assert split_rng(12, "val", 2).random(4).tolist() != draws["val", 2]
    with pytest.raises(UnknownNameError, match="train"):
        split_rng(0, "validation", 0)
    for seed, index in [(-1, 0), (2**32, 0), (0, -1), (0, 2**32)]:
        with pytest.raises(ConfigError):
            split_rng(seed, "train", index)


def test_split_traces_are_named_disjoint_and_stable():
    cfg = SyntheticConfig(num_jobs=30)
    train = split_traces(cfg, 1, "train", 3, ARENA_TYPES)
    val = split_traces(cfg, 1, "val", 2, ARENA_TYPES)
    test = split_traces(cfg, 1, "test", 2, ARENA_TYPES)
    assert [t.name for t in train] == ["train-0", "train-1", "train-2"]
    assert train[0].jobs[0].job_id == "train-0-00000"
    sigs = [tuple(signature(t)) for t in (*train, *val, *test)]
    assert len(set(sigs)) == len(sigs)
    assert split_traces(cfg, 1, "train", 2, ARENA_TYPES) == train[:2]
    assert split_traces(cfg, 1, "train", 0, ARENA_TYPES) == []


def test_defaults_are_the_philly_fit():
    require_data(datasets.ARENA_TRACES["philly"])
    fitted = fit_synthetic_config(load_arena_trace("philly"))
    default = SyntheticConfig()
    assert fitted.iterations_log_mu == pytest.approx(default.iterations_log_mu, abs=1e-6)
    assert fitted.iterations_log_sigma == pytest.approx(default.iterations_log_sigma, abs=1e-6)
    rest = {"iterations_log_mu": 0.0, "iterations_log_sigma": 1.0}
    assert SyntheticConfig.from_mapping({**fitted.to_dict(), **rest}) == SyntheticConfig(**rest)


def test_fit_rejects_tiny_traces():
    cfg = SyntheticConfig(num_jobs=1)
    with pytest.raises(ConfigError, match="at least two jobs"):
        fit_synthetic_config(generate(cfg, np.random.default_rng(0), ARENA_TYPES))


def test_fit_recovers_a_generated_workload():
    cfg = SyntheticConfig(num_jobs=5000)
    fitted = fit_synthetic_config(
        generate(cfg, np.random.default_rng(4), ARENA_TYPES), arrival="poisson"
    )
    assert fitted.mean_interarrival_s == pytest.approx(cfg.mean_interarrival_s, rel=0.05)
    assert fitted.iterations_log_mu == pytest.approx(cfg.iterations_log_mu, abs=0.06)
    assert normalised(fitted.gpu_request)[4] == pytest.approx(
        normalised(cfg.gpu_request)[4], abs=0.03
    )


def test_fit_workload_script(tmp_path):
    out = subprocess.run(
        [sys.executable, "experiments/fit_workload.py", "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 0 and "--data-dir" in out.stdout and "--python" in out.stdout
    csv = tmp_path / "t.csv"
    csv.write_text(
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n"
        "a,10,100,bert__760M,,128,2,a40\nb,40,1000,moe__690M,,256,4,a10\n"
    )
    out = subprocess.run(
        [sys.executable, "experiments/fit_workload.py", "--csv", str(csv), "--python"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "mean_interarrival_s: 30.0000" in out.stdout
    assert "PHILLY_GPU_REQUEST" in out.stdout and "defaults: no" in out.stdout
    bad = subprocess.run(
        [sys.executable, "experiments/fit_workload.py", "--data-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert bad.returncode == 2 and bad.stderr.startswith("error:")
