"""Smoke runs of the estimator scripts (tiny inputs, subprocess, as a user would run them)."""

import subprocess
import sys

import yaml

from crius_gym.perf.measurements import write_measurements_csv
from tests.conftest import REPO

ROW = {
    "model_family": "bert",
    "model_name": "bert-small",
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


def tiny_csv(tmp_path):
    rows = []
    for i, (nodes, gpn, t) in enumerate(
        [(1, 1, 13.5), (1, 2, 7.5), (2, 1, 7.8), (2, 2, 4.5), (4, 2, 3.2), (8, 2, 2.4)]
    ):
        rows.append(
            {
                **ROW,
                "num_nodes": str(nodes),
                "gpus_per_node": str(gpn),
                "measured_iter_time_s": str(t),
                "split": "calibration" if i % 2 == 0 else "holdout",
            }
        )
    rows.append(
        {
            **ROW,
            "global_batch": "4096",
            "num_nodes": "1",
            "gpus_per_node": "1",
            "status": "oom",
            "split": "holdout",
        }
    )
    path = tmp_path / "tiny.csv"
    write_measurements_csv(rows, path)
    return path


def run(*args):
    return subprocess.run(
        [sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=600, check=False
    )


def test_help_explains_options():
    for script in ("experiments/validate_estimator.py", "experiments/calibrate_estimator.py"):
        out = run(script, "--help")
        assert out.returncode == 0, out.stderr
        assert "--measurements" in out.stdout and "--out" in out.stdout


def test_calibrate_then_validate(tmp_path):
    csv_path = tiny_csv(tmp_path)
    cal = tmp_path / "cal.yaml"
    out = run(
        "experiments/calibrate_estimator.py", "--measurements", str(csv_path), "--out", str(cal)
    )
    assert out.returncode == 0, out.stderr
    text = cal.read_text()
    assert "calibrate_estimator.py" in text  # the command is recorded
    fitted = yaml.safe_load(text)["frameworks"]["alpa"]
    assert "a40" in fitted["gpus"]
    # No megatron rows: its packaged constants are kept, so every scenario still loads.
    assert "megatron: no calibration rows; the packaged constants are kept" in text
    assert "megatron" in yaml.safe_load(text)["frameworks"]
    again = run(
        "experiments/calibrate_estimator.py", "--measurements", str(csv_path), "--out", str(cal)
    )
    assert again.returncode == 2 and "exists; pass --force" in again.stderr

    res = tmp_path / "res"
    out = run(
        "experiments/validate_estimator.py",
        "--measurements",
        str(csv_path),
        "--calibration",
        str(cal),
        "--out",
        str(res),
        "--tuner-repeats",
        "1",
    )
    assert out.returncode == 0, out.stderr
    report = (res / "estimator_validation.md").read_text()
    assert "validate_estimator.py" in report and "## Targets" in report
    assert (res / "estimator_validation_scatter.png").stat().st_size > 1000
    rows = (res / "estimator_validation_rows.csv").read_text().splitlines()
    assert len(rows) == 8 and "predicted_iter_time_s" in rows[0]


def test_malformed_measurements_give_a_clear_error(tmp_path):
    bad = tmp_path / "bad.csv"
    write_measurements_csv(
        [{**ROW, "num_nodes": "1", "gpus_per_node": "x", "measured_iter_time_s": "1"}], bad
    )
    out = run(
        "experiments/validate_estimator.py",
        "--measurements",
        str(bad),
        "--out",
        str(tmp_path / "o"),
    )
    assert out.returncode != 0
    assert "line 2" in out.stderr and "gpus_per_node" in out.stderr


def test_validate_without_optional_columns(tmp_path):
    """Only the required columns (no split, status or plan columns): rows count as holdout."""
    import csv

    rows = [
        {**ROW, "num_nodes": str(n), "gpus_per_node": "2", "measured_iter_time_s": str(t)}
        for n, t in ((1, 7.5), (2, 4.5), (4, 3.2))
    ]
    bare = tmp_path / "bare.csv"
    with bare.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    res = tmp_path / "res"
    out = run("experiments/validate_estimator.py", "--measurements", str(bare), "--out", str(res))
    assert out.returncode == 0, out.stderr
    report = (res / "estimator_validation.md").read_text()
    assert "**holdout rows**" in report and (res / "estimator_validation_scatter.png").is_file()
    # A second run into the same folder is refused without --force (nothing is overwritten).
    again = run("experiments/validate_estimator.py", "--measurements", str(bare), "--out", str(res))
    assert again.returncode == 2 and "pass --force" in again.stderr
    assert (res / "estimator_validation.md").read_text() == report
    # Header only: a clear message naming the file, no traceback.
    empty = tmp_path / "empty.csv"
    empty.write_text(bare.read_text().splitlines()[0] + "\n")
    out = run(
        "experiments/validate_estimator.py",
        "--measurements",
        str(empty),
        "--out",
        str(res),
        "--force",
    )
    assert (
        out.returncode != 0
        and "no measurement rows" in out.stderr
        and "Traceback" not in out.stderr
    )
    # Every row OOM: the report is written without a scatter plot.
    oom = tmp_path / "oom.csv"
    write_measurements_csv([{**ROW, "num_nodes": "1", "gpus_per_node": "1", "status": "oom"}], oom)
    out = run(
        "experiments/validate_estimator.py",
        "--measurements",
        str(oom),
        "--out",
        str(tmp_path / "o"),
    )
    assert out.returncode == 0, out.stderr
    assert "no scatter plot" in (tmp_path / "o" / "estimator_validation.md").read_text()


def test_calibration_rows_of_a_borrowing_framework_are_refused(tmp_path):
    """megatron-deepspeed uses Megatron-LM's constants: a row asking to fit it names itself."""
    rows = [
        {
            **ROW,
            "model_family": "gpt",
            "framework": "megatron-deepspeed",
            "gpu_type": "a100-80gb",
            "num_nodes": "1",
            "gpus_per_node": "8",
            "measured_iter_time_s": "2.0",
            "split": "calibration",
        }
    ]
    path = tmp_path / "ds.csv"
    write_measurements_csv(rows, path)
    out = run(
        "experiments/calibrate_estimator.py",
        "--measurements",
        str(path),
        "--out",
        str(tmp_path / "cal.yaml"),
    )
    assert out.returncode != 0 and not (tmp_path / "cal.yaml").exists()
    assert "ds.csv" in out.stderr and "line 2" in out.stderr and "split" in out.stderr
    assert "calibration of megatron" in out.stderr
