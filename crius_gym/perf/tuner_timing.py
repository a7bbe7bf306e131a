"""Timing workloads of the tuner and the plan search.

The validation and benchmark scripts share them, so both measure the same thing.

* :data:`ARENA_JOBS` on :data:`SIM_CLUSTER`: the 39 (model, batch) pairs of the Arena traces on
  the Crius paper's simulated cluster, each tuned with a cold cache (:func:`cold_tune_ms`);
* :func:`large_cell_search`: one GPT-3 175B Cell of 1,024 A100 80 GB at B 1536, every stage
  count, the whole Megatron-LM plan space.
"""

from __future__ import annotations

import statistics
import time

from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.plan import Layout
from crius_gym.perf.tuner import Tuner, TunerConfig
from crius_gym.workload.models import build_model, load_model_catalog

#: The Crius paper's simulated cluster (Arena sim_cluster_spec.json): four GPU types, 1,280 GPUs.
SIM_CLUSTER = [
    {"gpu": "a100", "nodes": 80, "gpus_per_node": 4},
    {"gpu": "v100", "nodes": 20, "gpus_per_node": 16},
    {"gpu": "a40", "nodes": 160, "gpus_per_node": 2},
    {"gpu": "a10", "nodes": 160, "gpus_per_node": 2},
]
#: The (model, global batch) pairs of the Arena traces.
ARENA_JOBS = [
    (f"{fam}-{size}", b)
    for fam, sizes, batches in [
        ("bert", ["760m", "1.3b", "2.6b", "6.7b"], [128, 256, 512]),
        ("moe", ["690m", "1.3b", "2.4b", "10b"], [256, 512, 1024]),
        ("wide_resnet", ["500m", "1b", "2b", "4b", "6.8b"], [256, 512, 1024]),
    ]
    for size in sizes
    for b in batches
]


def cold_tune_ms(
    estimator: Estimator, repeats: int, config: TunerConfig | None = None
) -> list[float]:
    """Cold-cache tuning time of each Arena (model, batch) on the 4-type cluster, ms.

    Args:
        estimator: prices the plans (its framework sets the plan space).
        repeats: runs per job (the median is kept).
        config: tuner settings (default :class:`TunerConfig`).

    Returns:
        One median per job, in :data:`ARENA_JOBS` order.
    """
    cluster = build_cluster(SIM_CLUSTER)
    models = load_model_catalog()
    out = []
    for name, batch in ARENA_JOBS:
        runs = []
        for _ in range(repeats):
            tuner = Tuner(cluster, estimator, config or TunerConfig())  # cold cache every time
            t0 = time.perf_counter()
            tuner.tune(models.get(name), batch)
            runs.append(time.perf_counter() - t0)
        out.append(statistics.median(runs) * 1000)
    return out


def large_cell_search(estimator: Estimator, repeats: int) -> tuple[float, int, str]:
    """Search one GPT-3 175B Cell of 1,024 A100 80 GB (128 DGX nodes, 8 NICs each) at B 1536.

    Returns:
        (median seconds, plans priced, the best plan and its iteration time).
    """
    group = build_cluster(
        [{"gpu": "a100-80gb", "nodes": 128, "gpus_per_node": 8, "nics_per_node": 8}]
    ).groups[0]
    model = build_model(
        "gpt-175b",
        "gpt",
        {
            "hidden_size": 12288,
            "num_heads": 96,
            "num_layers": 96,
            "seq_len": 2048,
            "vocab_size": 51200,
            "dtype": "fp16",
        },
    )
    runs, priced, plan = [], 0, ""
    for _ in range(repeats):
        t0 = time.perf_counter()
        best, priced = estimator.search(model, 1536, group, Layout(128, 8))
        runs.append(time.perf_counter() - t0)
        plan = "none fits" if best is None else f"{best.plan} ({best.iter_time_s:.1f} s)"
    return statistics.median(runs), priced, plan
