"""Killed, resumed, identical (issue 37, item 6) for baseline runs and evaluations: each finished
(policy, trace) run is stored under <out>/.partial/ (crius_gym/eval/resume.py), so running the
same command again with the same --out computes only what is missing, and writes the tables an
uninterrupted run writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd

from crius_gym.eval.resume import RunStore
from crius_gym.eval.runs import run_policies
from crius_gym.eval.tables import summary_frame
from crius_gym.eval.trace_sets import trace_set
from crius_gym.scenarios import load_scenario
from tests.conftest import REPO

POLICIES = ["crius", "fcfs"]


def _runs(store: RunStore | None):
    scenario = load_scenario("tiny")
    tuner = scenario.make_tuner(None, None)
    traces = trace_set(scenario, "test", tuner, data_dir=None, max_traces=None)
    return run_policies(
        scenario, traces, POLICIES, seed=0, data_dir=None, tuner=tuner, progress=False, store=store
    )


def test_a_store_with_some_runs_gives_the_uninterrupted_results(tmp_path):
    whole = summary_frame(_runs(None))
    store = RunStore(tmp_path)
    _runs(store)
    stored = sorted(store.folder.glob("*.pkl"))
    assert len(stored) == 4
    for path in stored[:2]:  # as if killed after two runs
        path.unlink()
    (store.folder / stored[2].name).write_bytes(b"half a pickle")  # killed mid-write elsewhere
    resumed = RunStore(tmp_path)
    again = summary_frame(_runs(resumed))
    assert resumed.reused == 1  # the two missing and the unreadable one are redone
    pd.testing.assert_frame_equal(whole, again)


def _baselines(out: Path) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "experiments/run_baselines.py", "--scenario", "tiny", "--traces"]
    cmd += ["test", "--policies", *POLICIES, "--out", str(out), "--no-progress"]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, check=False)


def test_run_baselines_resumes_from_the_runs_an_interrupted_call_stored(tmp_path):
    whole = _baselines(tmp_path / "whole")
    assert whole.returncode == 0, whole.stderr
    interrupted = tmp_path / "interrupted"
    _runs(RunStore(interrupted))  # what a killed call with this --out had finished
    (interrupted / "tiny").mkdir()  # and a partial output of its own, not refused
    resumed = _baselines(interrupted)
    assert resumed.returncode == 0, resumed.stderr
    assert "4 run(s) reused" in resumed.stdout
    assert not (interrupted / ".partial").exists()  # cleared once the report is written
    for name in ("summary.csv", "jobs_crius.csv", "jobs_fcfs.csv"):
        a = pd.read_csv(tmp_path / "whole" / "tiny" / name)
        b = pd.read_csv(interrupted / "tiny" / name)
        pd.testing.assert_frame_equal(a, b)


def test_evaluation_tasks_resume_from_a_store(tmp_path):
    from crius_gym.eval.tasks import HeuristicTask, run_tasks

    scenario = load_scenario("tiny")
    traces = trace_set(scenario, "test", scenario.make_tuner(None, None), data_dir=None)
    tasks = [HeuristicTask(p, "tiny", t) for p in POLICIES for t in traces]
    whole = summary_frame([r.result for r in run_tasks(tasks)])
    store = RunStore(tmp_path)
    run_tasks(tasks, store=store)
    next(iter(sorted(store.folder.glob("*.pkl")))).unlink()  # killed before the last run
    resumed = RunStore(tmp_path)
    again = summary_frame([r.result for r in run_tasks(tasks, store=resumed)])
    assert resumed.reused == len(tasks) - 1
    pd.testing.assert_frame_equal(whole, again)


def test_an_edited_plug_in_is_run_again(tmp_path):
    """Plug-in policies are outside the package's code digest: their file is in the key."""
    from crius_gym.eval.resume import policy_source_digest

    plugin = tmp_path / "mine.py"
    plugin.write_text("X = 1\n")
    before = policy_source_digest(f"{plugin}:Mine")
    plugin.write_text("X = 2\n")
    assert before is not None and policy_source_digest(f"{plugin}:Mine") != before
    assert policy_source_digest("crius") is None  # the package's own: in code_digest()
