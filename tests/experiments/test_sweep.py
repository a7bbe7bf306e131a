"""Smoke run of the Ray Tune sweep (local Ray, tiny budget), then its resume path."""

import subprocess
import sys

import pytest

from tests.conftest import REPO

pytest.importorskip("ray")

ARGS = [
    "experiments/sweep.py",
    "--scenario",
    "tiny",
    "--grid",
    "seed=0,1",
    "--total-timesteps",
    "256",
    "--set",
    "n_steps=64",
    "--set",
    "batch_size=32",
    "--set",
    "eval_freq=128",
    "--set",
    "checkpoint_freq=128",
    "--set",
    "bc_episodes=1",
    "--set",
    "bc_epochs=1",
    "--set",
    "n_envs=1",
    "--set",
    "eval_traces=1",
    "--name",
    "smoke",
]


@pytest.mark.ray
def test_sweep_smoke_and_resume(tmp_path):
    def sweep(*extra):
        return subprocess.run(
            [sys.executable, *ARGS, "--out", str(tmp_path), *extra],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )

    out = sweep()
    assert out.returncode == 0, out.stderr[-3000:]
    report = (tmp_path / "sweeps" / "smoke.md").read_text()
    assert "eval_avg_jct_s" in report and report.count("| tiny") == 2
    trials = list((tmp_path / "policies" / "smoke").iterdir())
    assert len(trials) == 2
    for t in trials:  # the same outputs as train_ppo.py, per trial
        assert (t / "model.zip").is_file() and (t / "metadata.yaml").is_file()
    again = sweep("--resume")
    assert again.returncode == 0, again.stderr[-3000:]
    assert (tmp_path / "sweeps" / "smoke.md").read_text().count("| tiny") == 2
