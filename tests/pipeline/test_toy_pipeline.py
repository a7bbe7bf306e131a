"""A toy pipeline in a temporary folder: runs, skips, stale reasons, interruption, resumption."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from crius_gym.pipeline.declaration import load_pipeline
from crius_gym.pipeline.engine import Engine

MAKE = """
import sys, time
from pathlib import Path
src, out, counter = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
with counter.open("a") as fh:
    fh.write("run\\n")
text = src.read_text()
out.parent.mkdir(parents=True, exist_ok=True)
out.write_text("partial")          # a half-written output, in the staging copy only
if "FAIL" in text:
    sys.exit(3)
if "SLEEP" in text:
    time.sleep(60)
out.write_text(text.upper())
"""

DECL = """
lock: results/pipeline.lock.json
stages:
  first:
    cmd: python make.py in.txt {out}/first.txt runs_first.log
    code: make.py
    inputs: in.txt
    outputs: results/first.txt
  second:
    cmd: python make.py results/first.txt {out}/sub/second.txt runs_second.log
    code: make.py
    inputs: results/first.txt
    outputs: results/sub/second.txt
  notes:
    kind: manual
    inputs: results/sub/second.txt
    outputs: results/notes.md
"""


def _setup(tmp_path: Path) -> Path:
    (tmp_path / "make.py").write_text(MAKE)
    (tmp_path / "in.txt").write_text("hello")
    (tmp_path / "pipeline.yaml").write_text(textwrap.dedent(DECL))
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "notes.md").write_text("hand-written")
    return tmp_path


def _engine(root: Path) -> Engine:
    return Engine(load_pipeline(root / "pipeline.yaml", root=root), echo=lambda _: None)


def _runs(root: Path, stage: str) -> int:
    log = root / f"runs_{stage}.log"
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_runs_in_order_then_skips(tmp_path: Path) -> None:
    root = _setup(tmp_path)
    engine = _engine(root)
    assert engine.plan() == ["first", "second", "notes"]
    assert engine.run(["first", "second"]) == 0
    assert (root / "results" / "first.txt").read_text() == "HELLO"
    assert (root / "results" / "sub" / "second.txt").read_text() == "HELLO"
    status = _engine(root).status()
    assert status["first"].state == status["second"].state == "up to date"
    assert status["notes"].state == "review"
    # Nothing changed: nothing runs again.
    assert _engine(root).run(["first", "second"]) == 0
    assert (_runs(root, "first"), _runs(root, "second")) == (1, 1)
    # The lock holds content hashes only, under paths relative to the root.
    lock = json.loads((root / "results" / "pipeline.lock.json").read_text())
    assert lock["first"]["in.txt"].startswith("sha256:")
    assert not any(key.startswith("/") for key in lock["first"])


def test_changed_input_reruns_downstream_and_touch_does_not(tmp_path: Path) -> None:
    root = _setup(tmp_path)
    assert _engine(root).run(["first", "second"]) == 0
    in_txt = root / "in.txt"
    os.utime(in_txt, (time.time() + 100, time.time() + 100))  # same content, new mtime
    assert _engine(root).status()["first"].state == "up to date"
    in_txt.write_text("world")
    status = _engine(root).status()
    assert status["first"].state == "stale"
    assert any("in.txt" in r for r in status["first"].reasons)
    assert status["second"].state == "stale"  # upstream stale
    assert any("upstream" in r for r in status["second"].reasons)
    assert _engine(root).run(["first", "second"]) == 0
    assert (root / "results" / "sub" / "second.txt").read_text() == "WORLD"
    assert (_runs(root, "first"), _runs(root, "second")) == (2, 2)


def test_declaration_change_makes_stale(tmp_path: Path) -> None:
    root = _setup(tmp_path)
    assert _engine(root).run(["first"]) == 0
    decl = root / "pipeline.yaml"
    decl.write_text(decl.read_text().replace("runs_first.log", "runs_first.log  # same"))
    assert _engine(root).status()["first"].state == "up to date"  # a comment: same command
    decl.write_text(
        decl.read_text().replace(
            "{out}/first.txt runs_first.log", "{out}/first.txt runs_first.log x"
        )
    )
    status = _engine(root).status()["first"]
    assert status.state == "stale" and "declaration changed" in status.reasons[0]


def test_failed_stage_leaves_previous_output(tmp_path: Path) -> None:
    root = _setup(tmp_path)
    assert _engine(root).run(["first"]) == 0
    (root / "in.txt").write_text("FAIL now")
    assert _engine(root).run(["first"]) != 0
    assert (root / "results" / "first.txt").read_text() == "HELLO"
    assert _engine(root).status()["first"].state == "stale"


def test_killed_run_leaves_previous_output_and_resumes(tmp_path: Path) -> None:
    root = _setup(tmp_path)
    assert _engine(root).run(["first", "second"]) == 0
    (root / "in.txt").write_text("SLEEP then world")
    script = (
        "import sys; from pathlib import Path; from crius_gym.pipeline.declaration import "
        "load_pipeline; from crius_gym.pipeline.engine import Engine; r = Path(sys.argv[1]); "
        "sys.exit(Engine(load_pipeline(r / 'pipeline.yaml', root=r)).run(['first', 'second']))"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(root)],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while _runs(root, "first") < 2 and time.time() < deadline:
        time.sleep(0.1)
    time.sleep(0.5)  # the stage has written its partial output in staging by now
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (root / "results" / "first.txt").read_text() == "HELLO"
    assert (root / "results" / "sub" / "second.txt").read_text() == "HELLO"
    assert _engine(root).status()["first"].state == "stale"
    (root / "in.txt").write_text("world")
    assert _engine(root).run(["first", "second"]) == 0
    assert (root / "results" / "sub" / "second.txt").read_text() == "WORLD"


def test_finished_stage_is_not_redone_after_a_later_failure(tmp_path: Path) -> None:
    root = _setup(tmp_path)
    (root / "results" / "first.txt").write_text("stale")
    decl = root / "pipeline.yaml"
    decl.write_text(decl.read_text().replace("results/first.txt {out}", "missing.txt {out}"))
    assert _engine(root).run(["first", "second"]) != 0  # second fails: missing.txt
    assert _engine(root).status()["first"].state == "up to date"  # recorded at once
    decl.write_text(decl.read_text().replace("missing.txt {out}", "results/first.txt {out}"))
    assert _engine(root).run(["first", "second"]) == 0
    assert _runs(root, "first") == 1


def test_manual_stage_is_accepted_by_a_person(tmp_path: Path) -> None:
    root = _setup(tmp_path)
    assert _engine(root).run(["first", "second"]) == 0
    assert _engine(root).status()["notes"].state == "review"
    assert _engine(root).run(["notes"]) != 0  # cannot write itself
    _engine(root).accept(["notes"])
    assert _engine(root).status()["notes"].state == "up to date"
    (root / "in.txt").write_text("changed")
    assert _engine(root).status()["notes"].state == "review"


def test_interrupted_promotion_is_rolled_forward(tmp_path: Path) -> None:
    root = _setup(tmp_path)
    engine = _engine(root)
    staging = engine.work_dir / "first" / "out"
    staging.mkdir(parents=True)
    (staging / "first.txt").write_text("PROMOTED")
    journal = engine.work_dir / "first" / "promote.json"
    journal.write_text(json.dumps({"staging": str(staging), "files": ["first.txt"]}))
    engine._finish_promotions()
    assert (root / "results" / "first.txt").read_text() == "PROMOTED"
    assert not journal.exists()


@pytest.mark.parametrize(
    "bad",
    [
        "stages: 3",
        "stages: {a: {kind: nope, outputs: [results/x]}}",
        "stages: {a: {cmd: x, outputs: [elsewhere/x]}}",
        "stages: {a: {cmd: x, outputs: [results/x], colour: red}}",
    ],
)
def test_bad_declarations_name_the_problem(tmp_path: Path, bad: str) -> None:
    from crius_gym.errors import ConfigError

    (tmp_path / "p.yaml").write_text(bad)
    with pytest.raises(ConfigError, match=r"p\.yaml"):
        load_pipeline(tmp_path / "p.yaml", root=tmp_path)
