"""The artifact's oracle table: its lookup fallbacks, and the table-backed tuner and truth."""

from __future__ import annotations

import pytest

from crius_gym import datasets
from crius_gym.errors import ConfigError
from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.artifact_table import (
    LOCALITY_SCALE_FACTOR,
    PARAM_NUM_SCALE_FACTOR,
    ArtifactTable,
    TableTuner,
)
from crius_gym.perf.calibration import get_calibration
from crius_gym.perf.cell import Cell
from crius_gym.perf.estimator import Estimator
from crius_gym.perf.framework import get_framework
from crius_gym.perf.measurements import read_measurements, write_measurements_csv
from crius_gym.perf.plan import Layout, PlanConstraints
from crius_gym.scenarios import load_scenario
from crius_gym.sim.truth import ArtifactTableTruth
from tests.conftest import require_data
from tests.sim.conftest import MODELS, job

BERT = {
    "model_family": "bert",
    "hidden_size": "1536",
    "num_layers": "24",
    "num_heads": "16",
    "seq_len": "1024",
    "vocab_size": "51200",
    "dtype": "fp16",
    "global_batch": "128",
    "gpu_type": "a40",
    "framework": "alpa",
}


def row(model, nodes, gpn, seconds=None):
    out = {**BERT, "model_name": model, "num_nodes": str(nodes), "gpus_per_node": str(gpn)}
    if seconds is None:
        out["status"] = "oom"
    else:
        out["measured_iter_time_s"] = str(seconds)
    return out


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "m.csv"
    write_measurements_csv(
        [
            row("bert-760m", 1, 2, 6.0),  # best layout of 2 A40s
            row("bert-760m", 2, 2, 4.0),  # best layout of 4
            row("bert-760m", 1, 1, None),  # measured OOM (-1 in the artifact's table)
            row("bert-1.3b", 4, 2, 9.0),  # a larger model at 8 GPUs
            row("bert-2.6b", 8, 2, 400.0),  # above one round: invalid
        ],
        path,
    )
    return ArtifactTable(read_measurements(path), {"a40": 2})


def test_exact_entries_and_oom(table):
    assert table.iter_time_s("bert-760m", 128, "a40", Layout(1, 2)) == 6.0
    assert table.iter_time_s("bert-760m", 128, "a40", Layout(2, 2)) == 4.0
    assert table.iter_time_s("bert-760m", 128, "a40", Layout(1, 1)) is None  # OOM, no fallback
    assert table.iter_time_s("bert-760m", 256, "a40", Layout(1, 2)) is None  # other batch


def test_relaxed_layout_is_the_best_layout_at_0_9_per_halving(table):
    # 4 GPUs as 4 nodes x 1 GPU: the best layout 2x2 at 0.9x its throughput.
    got = table.iter_time_s("bert-760m", 128, "a40", Layout(4, 1))
    assert got == pytest.approx(4.0 / LOCALITY_SCALE_FACTOR)
    assert table.iter_time_s("bert-760m", 128, "a40", Layout(2, 1)) == pytest.approx(6.0 / 0.9)


def test_smaller_model_is_a_larger_measured_one_at_1_8_per_size_step(table):
    # bert-760m at 4x2 is unmeasured; bert-1.3b (one size step up) is: 1.8x its throughput.
    got = table.iter_time_s("bert-760m", 128, "a40", Layout(4, 2))
    assert got == pytest.approx(9.0 / PARAM_NUM_SCALE_FACTOR)
    # Entries above one round are invalid, also when a fallback would scale them below it (the
    # artifact checks the entry it found); unknown models are absent.
    assert table.iter_time_s("bert-2.6b", 128, "a40", Layout(8, 2)) is None
    assert table.iter_time_s("bert-1.3b", 128, "a40", Layout(8, 2)) is None
    assert table.iter_time_s("gpt-1.7b", 128, "a40", Layout(1, 2)) is None


def test_needs_alpa_rows():
    with pytest.raises(ConfigError, match="Arena"):
        ArtifactTable([], {"a40": 2})


def test_table_tuner_and_truth_see_the_table(table):
    cluster = build_cluster([{"gpu": "a40", "nodes": 8, "gpus_per_node": 2}])
    est = Estimator(get_framework("alpa"), get_calibration("alpa"))
    tuner = TableTuner(cluster, est, table)
    model = MODELS.get("bert-760m")
    res = tuner.tune(model, 128)
    times = {c.cell.layout: c.iter_time_s for c in res.candidates}
    # 1 GPU is OOM; 2, 4 and 8 GPUs are priced from the table (8 through the larger model).
    assert Layout(1, 1) not in times and times[Layout(1, 2)] == 6.0
    assert times[Layout(2, 2)] == 4.0
    # Constrained queries read the same tuned optimum (the artifact's only_dp fallback).
    dp = PlanConstraints(pipeline=1, tensor=1)
    assert tuner.best_in_layout(model, 128, "a40", Layout(2, 2), dp).iter_time_s == 4.0
    truth = ArtifactTableTruth(tuner)
    j = job(0, 0.0, model="bert-760m", batch=128)
    assert truth.iter_time_s(j, Cell("a40", Layout(4, 1), 1), None) == pytest.approx(4.0 / 0.9)
    plain = type(tuner).__mro__[1](cluster, est)
    with pytest.raises(ConfigError):
        ArtifactTableTruth(plain)


def test_public_table_matches_the_requests_of_the_philly_trace():
    require_data(datasets.ARENA_MEASUREMENTS)
    require_data(datasets.ARENA_TRACES["philly"])
    sc = load_scenario("crius-sim-1280-artifact")
    tuner = sc.make_tuner()
    assert isinstance(tuner, TableTuner) and len(tuner.table) == 329
    # The artifact filtered its trace so that every request is feasible in its table
    # (traces/regenerate_sim_trace.py); the table tuner agrees.
    trace = sc.own_trace(tuner=tuner)
    for j in trace.jobs:
        lay = tuner.table.best_layout(j.requested_gpu_type, j.requested_gpus)
        assert tuner.best_in_layout(j.model, j.global_batch, j.requested_gpu_type, lay)
