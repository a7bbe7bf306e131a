"""``--trace FILE --trace-format F`` on run_baselines.py: every format, malformed files refused."""

from __future__ import annotations

import pytest

from tests.conftest import REPO
from tests.experiments.test_rl_scripts import run

FIXTURES = REPO / "tests" / "workload" / "fixtures"


@pytest.mark.parametrize(
    ("path", "fmt", "jobs"),
    [
        ("generic.csv", "auto", 2),  # g1 (8 GPUs) fits nowhere on tiny
        ("philly/cluster_job_log", "philly", 2),
        ("helios/Venus/cluster_log.csv", "auto", 1),  # the 8-GPU job fits nowhere on tiny
        ("pai/pai_job_table.csv", "pai", 2),
    ],
)
def test_run_baselines_on_each_format(tmp_path, path, fmt, jobs):
    out = run(
        "experiments/run_baselines.py",
        "--scenario",
        "tiny",
        "--trace",
        str(FIXTURES / path),
        "--trace-format",
        fmt,
        "--policies",
        "fcfs",
        "crius",
        "--out",
        str(tmp_path),
        "--no-progress",
    )
    assert out.returncode == 0, out.stderr
    assert f", {jobs} jobs (" in out.stdout
    assert "skipped line" in out.stderr  # every fixture has rows that cannot be used
    report = (tmp_path / "baselines.md").read_text()
    assert "[crius](tiny/gantt_crius.png)" in report
    # Each policy's schedule beside the CDFs.
    for policy in ("fcfs", "crius"):
        assert (tmp_path / "tiny" / f"gantt_{policy}.png").stat().st_size > 10_000


def test_a_malformed_trace_is_refused_with_file_and_field(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_s,gpus\n0,1\n")
    out = run(
        "experiments/run_baselines.py",
        "--scenario",
        "tiny",
        "--trace",
        str(bad),
        "--trace-format",
        "csv",
        "--out",
        str(tmp_path / "o"),
    )
    assert out.returncode == 2
    assert "bad.csv" in out.stderr and "'num_gpus'" in out.stderr
