"""The project's own pipeline: it covers every committed result, and its inputs are precise."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from crius_gym.pipeline.declaration import load_pipeline
from crius_gym.pipeline.engine import Engine
from crius_gym.pipeline.imports import import_closure

ROOT = Path(__file__).resolve().parents[2]
DECLARATION = ROOT / "experiments" / "pipeline.yaml"


def _tracked_results() -> list[str]:
    out = subprocess.run(
        ["git", "ls-files", "results"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if out.returncode != 0:
        pytest.skip("not a git checkout: cannot list the committed results")
    return [f for f in out.stdout.splitlines() if f != "results/pipeline.lock.json"]


def test_every_committed_result_is_made_by_exactly_one_stage() -> None:
    pipeline = load_pipeline(DECLARATION)
    made = pipeline.producer()  # load_pipeline refuses an output declared twice
    orphans = [f for f in _tracked_results() if f not in made]
    assert not orphans, f"committed under results/ but made by no stage: {orphans}"


def test_every_declared_output_is_committed_or_a_training_record() -> None:
    pipeline = load_pipeline(DECLARATION)
    tracked = set(_tracked_results())
    for stage in pipeline.stages.values():
        for out in stage.outputs:
            assert out in tracked or (ROOT / out).exists(), f"{stage.name}: {out} is neither"


def test_inputs_have_the_right_granularity() -> None:
    pipeline = load_pipeline(DECLARATION)
    validation = pipeline.inputs(pipeline.stages["estimator-validation"])
    assert "crius_gym/perf/estimator.py" in validation
    assert not any(f.startswith(("crius_gym/rl/", "crius_gym/env/")) for f in validation)
    baselines = pipeline.inputs(pipeline.stages["baselines"])
    assert "crius_gym/policies/crius/__init__.py" in baselines  # found by the registry
    assert not any(f.startswith("crius_gym/rl/") for f in baselines)
    training = pipeline.inputs(pipeline.stages["train-s0"])
    assert {"crius_gym/rl/ppo.py", "agents/ppo.yaml", "envs/mix.yaml"} <= set(training)
    evaluation = pipeline.stages["evaluation"]
    assert set(pipeline.upstream(evaluation)) >= {"reference-policy", "train-s1", "train-s2"}
    assert "train-s0" in pipeline.upstream(pipeline.stages["reference-policy"])


def test_import_closure_follows_relative_and_function_level_imports(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from pkg.c import thing\n")
    (pkg / "c.py").write_text("thing = 1\n")
    (pkg / "unused.py").write_text("")
    (tmp_path / "main.py").write_text("import pkg.a\n")
    closure = {str(p) for p in import_closure(tmp_path, ["main.py"])}
    assert closure == {"main.py", "pkg/__init__.py", "pkg/a.py", "pkg/b.py", "pkg/c.py"}


def test_status_runs_and_lists_every_stage() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "reproduce.py"), "--status"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for name in load_pipeline(DECLARATION).stages:
        assert name in proc.stdout


def test_dry_run_all_lists_every_output() -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "experiments" / "reproduce.py"), "--dry-run", "--all"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    for f in _tracked_results():
        assert f in proc.stdout


def test_stage_provenance_names_the_stage_and_the_final_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from crius_gym.provenance import Provenance

    monkeypatch.setenv("CRIUS_GYM_STAGE", "baselines")
    monkeypatch.setenv("CRIUS_GYM_STAGE_OUT", "results/tmp/reproduce/baselines/out")
    prov = Provenance.capture(["x.py", "--out", "results/tmp/reproduce/baselines/out/horizon"])
    assert "--out results/horizon" in prov.command
    assert "`baselines`" in prov.markdown()
    assert prov.as_dict()["stage"] == "baselines"
    assert "results/tmp" not in prov.as_dict()["command"]


def test_engine_plans_training_when_a_needed_run_folder_is_absent(tmp_path: Path) -> None:
    pipeline = load_pipeline(DECLARATION)
    engine = Engine(pipeline, work_dir=tmp_path, echo=lambda _: None)
    train = pipeline.stages["train-s1"]
    if (ROOT / "results" / "policies" / str(train.run)).is_dir():
        pytest.skip("the run folder is here")
    assert not engine._local_ok(train)
