"""``experiments/run_cluster.py`` end to end on ``tiny``: heuristics and a saved agent, the
run_baselines files and the report."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

pytest.importorskip("ray")
pytestmark = pytest.mark.ray
REPO = Path(__file__).resolve().parents[2]


def test_run_cluster_writes_the_baselines_files_and_the_report(tmp_path: Path) -> None:
    report = tmp_path / "fidelity.md"
    cmd = [sys.executable, str(REPO / "experiments" / "run_cluster.py"), "--scenario", "tiny"]
    cmd += ["--policies", "fcfs", "crius", "--time-scale", "20000", "--max-jobs", "5"]
    cmd += ["--policy", str(REPO / "results" / "reference_policy")]
    cmd += ["--ray-nodes", "2", "--compare-sim", "--out", str(tmp_path), "--report", str(report)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    summ = pd.read_csv(tmp_path / "tiny" / "summary.csv")
    rt = summ[summ["backend"] == "runtime"]
    names = ["crius", "fcfs", "reference_policy"]
    assert sorted(rt["policy"]) == names
    assert (rt["finished"] == 5).all() and (rt["checkpoints"] >= 0).all()
    assert sorted(summ[summ["backend"] == "simulator"]["policy"]) == names
    for p in names:
        jobs = pd.read_csv(tmp_path / "tiny" / f"jobs_{p}.csv")
        assert set(jobs["backend"]) == {"runtime", "simulator"} and len(jobs) == 10
    text = report.read_text()
    assert "| fcfs | 5 | 5/5 |" in text and "| reference_policy | 5 | 5/5 |" in text
