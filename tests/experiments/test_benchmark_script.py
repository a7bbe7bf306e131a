"""experiments/benchmark.py runs end to end in quick mode (a smoke test, not a measurement)."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_quick_benchmark_writes_tables_targets_and_machine_speed(tmp_path):
    out = tmp_path / "bench"
    cmd = [sys.executable, str(ROOT / "experiments" / "benchmark.py"), "--quick"]
    cmd += ["--sections", "sim", "tuner", "overload", "--repeats", "1", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    md = (out / "benchmark_quick.md").read_text()
    assert "Quick mode" in md and "Machine speed: a fixed 10M-step Python loop took" in md
    for section in ("## sim", "## tuner", "## overload"):
        assert section in md
    assert (out / "benchmark_quick.csv").stat().st_size > 0
    # A second run into the same folder refuses to overwrite without --force.
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode != 0 and "--force" in again.stderr


def test_quick_dagger_section_reports_labels_per_second_and_rollouts_per_label(tmp_path):
    import pandas as pd

    out = tmp_path / "bench"
    cmd = [sys.executable, str(ROOT / "experiments" / "benchmark.py"), "--quick"]
    cmd += ["--sections", "dagger", "--repeats", "1", "--out", str(out)]
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    assert "## dagger" in (out / "benchmark_quick.md").read_text()
    df = pd.read_csv(out / "benchmark_quick.csv")
    assert len(df) == 2 and (df["labels"] > 0).all()
    assert (df["labels_per_s"] > 0).all() and (df["rollouts_per_label"] >= 1).all()
