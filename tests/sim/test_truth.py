from crius_gym.perf.cell import Cell
from crius_gym.perf.measurements import write_measurements_csv
from crius_gym.perf.plan import Layout, PlanConstraints
from crius_gym.perf.public_tables import rows_to_measurements
from crius_gym.sim.truth import EstimatorTruth, MeasuredTruth
from tests.sim.conftest import job, make_sim

ROW = {
    "model_family": "bert",
    "model_name": "bert-760m",
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


def test_measured_truth_uses_measurements_and_falls_back(tmp_path):
    sim = make_sim([{"gpu": "a40", "nodes": 2, "gpus_per_node": 2}])
    path = tmp_path / "m.csv"
    write_measurements_csv(
        [
            {**ROW, "num_nodes": "1", "gpus_per_node": "2", "measured_iter_time_s": "7.5"},
            {**ROW, "num_nodes": "2", "gpus_per_node": "2", "status": "oom"},
        ],
        path,
    )
    truth = MeasuredTruth(
        sim.tuner,
        rows_to_measurements(
            [
                r.raw
                for r in __import__(
                    "crius_gym.perf.measurements", fromlist=["x"]
                ).read_measurements(path)
            ],
            path,
        ),
    )
    est = EstimatorTruth(sim.tuner)
    j = job(0, 0.0, model="bert-760m", batch=128)
    measured_cell = Cell("a40", Layout(1, 2), 1)
    assert truth.iter_time_s(j, measured_cell, None) == 7.5
    assert truth.iter_time_s(j, Cell("a40", Layout(1, 2), 2), None) == 7.5  # any stage count
    # Constrained plans and unmeasured layouts use the estimator.
    dp = PlanConstraints(pipeline=1, tensor=1)
    assert truth.iter_time_s(j, measured_cell, dp) == est.iter_time_s(j, measured_cell, dp)
    other = Cell("a40", Layout(2, 1), 1)
    assert truth.iter_time_s(j, other, None) == est.iter_time_s(j, other, None)
    # A measured OOM does not veto what the estimator lets the scheduler start.
    oom = Cell("a40", Layout(2, 2), 1)
    assert truth.iter_time_s(j, oom, None) == est.iter_time_s(j, oom, None)
