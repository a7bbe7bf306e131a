"""Smoke runs of train_ppo.py and evaluate.py with tiny budgets (train → save → evaluate)."""

import itertools
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO

TINY = [
    "--scenario",
    "tiny",
    "--total-timesteps",
    "512",
    "--set",
    "n_steps=64",
    "--set",
    "batch_size=32",
    "--set",
    "eval_freq=256",
    "--set",
    "checkpoint_freq=256",
    "--set",
    "bc_episodes=2",
    "--set",
    "bc_epochs=1",
    "--no-progress",
]


def run(*args, timeout=900):
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_help():
    for script in (
        "experiments/train_ppo.py",
        "experiments/evaluate.py",
        "experiments/run_baselines.py",
    ):
        out = run(script, "--help")
        assert out.returncode == 0, out.stderr
    train_help = run("experiments/train_ppo.py", "--help").stdout
    for option in ("--scenario", "--total-timesteps", "--seed", "--out", "--resume"):
        assert option in train_help


def test_train_then_evaluate(tmp_path):
    out = run("experiments/train_ppo.py", *TINY, "--out", str(tmp_path), "--run-name", "r")
    assert out.returncode == 0, out.stderr
    pol = tmp_path / "policies" / "r"
    for f in ("model.zip", "best_model.zip", "config.yaml", "metadata.yaml", "evaluations.csv"):
        assert (pol / f).is_file(), f
    meta = yaml.safe_load((pol / "metadata.yaml").read_text())
    assert meta["env_id"] == "crius_gym/Tiny-v4" and meta["timesteps"] >= 512
    assert "train_ppo.py" in meta["command"] and meta["git_revision"]
    assert list((tmp_path / "runs" / "r").rglob("events.out.tfevents.*"))
    # The guide margin is chosen on validation at the end and recorded with the policy.
    deploy = meta["deployment"]
    assert deploy["guide_margin"] in (0.0, 1.0) and set(deploy["scores"]) == {"0.0", "1.0", "inf"}
    assert deploy["scores"]["inf"] == 1.0

    res = tmp_path / "eval"
    out = run(
        "experiments/evaluate.py",
        "--policy",
        str(pol),
        "--scenario",
        "tiny",
        "--policies",
        "crius",
        "fcfs",
        "random",
        "--out",
        str(res),
        "--no-progress",
    )
    assert out.returncode == 0, out.stderr
    report = (res / "evaluation.md").read_text()
    assert "ppo:r" in report and "crius" in report and "evaluate.py" in report
    assert "**Headline**" in report and "best heuristic per trace" in report
    notes = tmp_path / "notes.md"
    notes.write_text("hand-written words")
    out = run(
        "experiments/evaluate.py",
        "--policy",
        str(pol),
        str(pol / "model.zip"),
        "--scenario",
        "tiny",
        "--policies",
        "fcfs",
        "--out",
        str(res),
        "--report-name",
        "n.md",
        "--force",
        "--notes",
        str(notes),
        "--no-progress",
    )
    assert out.returncode == 0, out.stderr
    assert "hand-written words" in (res / "n.md").read_text()
    # Any trace file, placed on the scenario's cluster, instead of the held-out set.
    trace = tmp_path / "mine.csv"
    trace.write_text(
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n"
        "a,0,300,bert__760M,,128,2,a40\nb,60,200,moe__690M,,256,4,a100\n"
    )
    own = tmp_path / "own.csv"  # the generic format: GPUs and run time, models drawn
    own.write_text("arrival_s,num_gpus,duration_s\n0,2,600\n30,1,1200\n90,4,300\n")
    out = run(
        "experiments/evaluate.py",
        "--policy",
        str(pol),
        "--scenario",
        "tiny",
        "--trace",
        str(trace),
        "--trace",
        str(own),
        "--policies",
        "crius",
        "--out",
        str(res),
        "--report-name",
        "t.md",
        "--force",
        "--guide-margin",
        "recorded",
        "inf",
        "--no-progress",
    )
    assert out.returncode == 0, out.stderr
    text = (res / "t.md").read_text()
    assert "trace files" in text and "`mine` (2 jobs)" in text and "`own` (3 jobs)" in text
    # Each margin is a row; 'inf' is the guide, so its JCT is Crius's.
    rows = pd.read_csv(res / "evaluation_tiny.csv")
    jct = rows.groupby("policy")["avg_jct_s"].mean()
    assert {"ppo:r", "ppo:r@inf", "crius"} <= set(jct.index)
    assert jct["ppo:r@inf"] == pytest.approx(jct["crius"])
    assert "guide margin" in text
    # Labels come from the run folder and file: the final model is a row of its own.
    assert "ppo:r/model" in (res / "n.md").read_text()
    for twice in ([str(pol), str(pol)], [str(pol), "--policy", str(pol)]):  # both forms add up
        out = run("experiments/evaluate.py", "--policy", *twice, "--out", str(res), "--force")
        assert out.returncode != 0 and "both labelled 'ppo:r'" in out.stderr
    assert (res / "eval_tiny" / "jct_cdf.png").is_file()
    assert (res / "eval_tiny" / "gantt_ppo_r_inf.png").is_file()  # ppo:r@inf's schedule
    assert (res / "learning_curve.png").is_file()

    # A policy saved for other observation spaces is refused with a clear message.
    def evaluate_fcfs():
        args = ["--policy", str(pol), "--scenario", "tiny", "--policies", "fcfs"]
        return run("experiments/evaluate.py", *args, "--out", str(res), "--force")

    assert evaluate_fcfs().returncode == 0
    # A heuristic's options per scenario; a wrong one is refused before any run.
    out = run(
        "experiments/evaluate.py",
        "--scenario",
        "tiny",
        "--policies",
        "crius",
        "crius-lookahead",
        "--policy-option",
        "tiny:crius-lookahead.no_such_option=1",
        "--out",
        str(res),
        "--force",
    )
    assert out.returncode != 0 and "no_such_option" in out.stderr
    meta["spaces"]["actions"] = 999
    (pol / "metadata.yaml").write_text(yaml.safe_dump(meta))
    out = evaluate_fcfs()
    assert out.returncode == 2 and "spaces" in out.stderr


def test_interrupt_saves_and_resume_continues(tmp_path):
    args = [*TINY, "--out", str(tmp_path), "--run-name", "x"]
    args[args.index("--total-timesteps") + 1] = "200000"
    proc = subprocess.Popen(
        [sys.executable, "experiments/train_ppo.py", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    ckpts = tmp_path / "policies" / "x" / "checkpoints"
    deadline = time.time() + 600
    # model_0 is the warm start's checkpoint; wait for one written during learning.
    while time.time() < deadline and not any(
        int(p.stem.split("_")[1]) > 0 for p in ckpts.glob("model_*.zip")
    ):
        time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "--resume x" in stdout
    saved = sorted(int(p.stem.split("_")[1]) for p in ckpts.glob("model_*.zip"))
    assert saved
    out = run(
        "experiments/train_ppo.py",
        "--out",
        str(tmp_path),
        "--resume",
        "x",
        "--total-timesteps",
        str(saved[-1] + 256),
        "--no-progress",
    )
    assert out.returncode == 0, out.stderr
    assert "resuming from" in out.stdout
    meta = yaml.safe_load((tmp_path / "policies" / "x" / "metadata.yaml").read_text())
    assert meta["timesteps"] >= saved[-1] + 256
    assert meta["warm_start"]["demonstrations"] > 0  # the first session's warm start is kept
    # The run's first command stays; both sessions are listed and their seconds add up.
    assert "200000" in meta["command"] and "--resume" not in meta["command"]
    assert [("--resume" in s["command"]) for s in meta["sessions"]] == [False, True]
    # Validation keeps its schedule across the resume: one evaluation per eval_freq (256).
    steps = [
        float(line.split(",")[0])
        for line in (tmp_path / "policies" / "x" / "evaluations.csv").read_text().splitlines()[1:]
    ]
    assert steps == sorted(set(steps))
    assert all(b - a >= 256 for a, b in itertools.pairwise(steps[1:]))


def test_same_seed_same_training(tmp_path):
    for name in ("a", "b"):
        out = run("experiments/train_ppo.py", *TINY, "--out", str(tmp_path), "--run-name", name)
        assert out.returncode == 0, out.stderr
    a = (tmp_path / "policies" / "a" / "evaluations.csv").read_text()
    b = (tmp_path / "policies" / "b" / "evaluations.csv").read_text()
    assert a == b


def test_agent_actions_compares_the_reference_policy_with_its_guide():
    policy = REPO / "results" / "reference_policy"
    if not (policy / "best_model.zip").is_file():
        pytest.skip(f"{policy} absent")
    out = run("experiments/agent_actions.py", "--policy", str(policy), "--scenario", "tiny")
    assert out.returncode == 0, out.stderr
    assert "| guide | agent | same action | decisions |" in out.stdout
    rows = [line.split("|") for line in out.stdout.splitlines() if line.startswith("| ")][2:]
    assert rows and all(int(r[4].replace(",", "")) > 0 for r in rows)
    assert "envelope" in out.stdout and "outside the envelope (Crius decides):" in out.stdout
    bare = run(
        "experiments/agent_actions.py",
        "--policy",
        str(policy),
        "--scenario",
        "tiny",
        "--deployment",
        "none",
    )
    assert bare.returncode == 0, bare.stderr
    assert "bare network" in bare.stdout and "outside the envelope" not in bare.stdout
