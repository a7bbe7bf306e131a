"""The scripts take your own scheduler and a plain SB3 model (issue 35: plug-ins, any model)."""

from __future__ import annotations

import os
import subprocess
import sys

import pandas as pd

from tests.conftest import REPO
from tests.test_plugins import POLICY


def run(*args, env=None, timeout=900):
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_run_baselines_takes_a_module_class_and_a_trace_set(tmp_path):
    (tmp_path / "my_sched.py").write_text(POLICY)
    out = run(
        "experiments/run_baselines.py",
        "--scenario",
        "tiny",
        "--traces",
        "test",
        "--max-traces",
        "2",
        "--policies",
        "crius",
        "my_sched:Idle",
        "--out",
        str(tmp_path / "o"),
        "--no-progress",
        env={"PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )
    assert out.returncode == 0, out.stderr
    summary = pd.read_csv(tmp_path / "o" / "tiny" / "summary.csv")
    assert sorted(summary["trace"].unique()) == ["tiny-test-0", "tiny-test-1"]
    assert set(summary["policy"]) == {"crius", "my_sched:Idle"}
    assert (tmp_path / "o" / "tiny" / "jobs_my_sched_Idle.csv").is_file()
    report = (tmp_path / "o" / "baselines.md").read_text()
    assert "`tiny-test-0`" in report and "`tiny-test-1`" in report


def test_evaluate_takes_a_file_class_and_refuses_unknown_names_first(tmp_path):
    f = tmp_path / "my_sched.py"
    f.write_text(POLICY)
    common = ["--scenario", "tiny", "--max-traces", "1", "--no-progress"]
    bad = run(
        "experiments/evaluate.py",
        *common,
        "--policies",
        "crius",
        "fcfs",
        "srwf",
        "--out",
        str(tmp_path / "bad"),
    )
    assert bad.returncode == 2
    assert "unknown policy 'srwf'; known:" in bad.stderr
    assert not (tmp_path / "bad" / "evaluation_tiny.csv").exists()  # no run started
    ok = run(
        "experiments/evaluate.py",
        *common,
        "--policies",
        "crius",
        f"{f}:Idle",
        "--out",
        str(tmp_path / "ok"),
    )
    assert ok.returncode == 0, ok.stderr
    rows = pd.read_csv(tmp_path / "ok" / "evaluation_tiny.csv")
    assert set(rows["policy"]) == {"crius", f"{f}:Idle"}


def test_a_missing_trace_file_names_the_option(tmp_path):
    out = run(
        "experiments/run_baselines.py",
        "--scenario",
        "tiny",
        "--trace",
        str(tmp_path / "nope.csv"),
        "--out",
        str(tmp_path / "o"),
    )
    assert out.returncode == 2
    assert "argument --trace: no such file or folder" in out.stderr
    assert str(tmp_path / "nope.csv") in out.stderr


PLAIN = """
import sys
from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env
import crius_gym  # registers the ids

env = make_vec_env("crius_gym/Tiny-v4", n_envs=2, seed=0)
model = MaskablePPO("MultiInputPolicy", env, n_steps=16, batch_size=16, n_epochs=1, seed=0,
                    device="cpu")
model.learn(32)
model.save(sys.argv[1])
"""


def test_a_plain_maskable_ppo_zip_evaluates(tmp_path):
    script = tmp_path / "train_plain.py"
    script.write_text(PLAIN)
    zip_path = tmp_path / "plain" / "model.zip"
    trained = run(str(script), str(zip_path))
    assert trained.returncode == 0, trained.stderr
    assert not (zip_path.parent / "metadata.yaml").exists()  # none of ours
    out = run(
        "experiments/evaluate.py",
        "--policy",
        str(zip_path),
        "--scenario",
        "tiny",
        "--policies",
        "crius",
        "--max-traces",
        "1",
        "--out",
        str(tmp_path / "ev"),
        "--no-progress",
    )
    assert out.returncode == 0, out.stderr
    rows = pd.read_csv(tmp_path / "ev" / "evaluation_tiny.csv")
    assert "ppo:plain/model" in set(rows["policy"])
    report = (tmp_path / "ev" / "evaluation.md").read_text()
    assert "plain SB3 model, taken as trained on crius_gym/Tiny-v4" in report
    wrong = run(
        "experiments/evaluate.py",
        "--policy",
        str(zip_path),
        "--env-id",
        "crius_gym/Nope-v4",
        "--scenario",
        "tiny",
        "--policies",
        "crius",
        "--out",
        str(tmp_path / "ev2"),
    )
    assert wrong.returncode == 2 and "not a registered crius_gym id" in wrong.stderr
