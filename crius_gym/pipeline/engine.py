"""Run the pipeline's stages with doit, and say which are stale and why.

Each stage becomes a doit task whose file dependencies are its inputs, whose targets are its
committed outputs and whose declaration (command, kind, files) is checked with doit's
``config_changed``; doit orders the tasks, skips the up-to-date ones and records the content
hashes of the inputs of every finished one in the lock file (:mod:`crius_gym.pipeline.lock`),
written after each stage, so an interrupted run resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from doit.cmd_base import TaskLoader2
from doit.dependency import Dependency
from doit.doit_cmd import DoitMain
from doit.exceptions import TaskFailed
from doit.task import Task
from doit.tools import config_changed

from crius_gym.atomic import atomic_path
from crius_gym.pipeline.declaration import Pipeline, Stage
from crius_gym.pipeline.lock import ContentChecker, SortedJsonDB, file_sha256
from crius_gym.yamlfile import load_yaml_file

#: Environment variables a stage's commands see (read by :mod:`crius_gym.provenance`).
STAGE_ENV = "CRIUS_GYM_STAGE"
STAGE_OUT_ENV = "CRIUS_GYM_STAGE_OUT"

_REVISION = re.compile(r"\bgit[ _:]+(?:revision:\s*)?([0-9a-f]{7,40})\b")
_SHOWN_FILES = 4


@dataclass(frozen=True)
class StageStatus:
    """What ``--status`` says of a stage.

    Attributes:
        name: the stage.
        state: ``up to date``, ``stale``, ``missing`` (an output is absent), ``frozen`` (a
            record stage) or ``review`` (a hand-written stage whose inputs changed).
        reasons: why, in words.
        note: an aside (e.g. a training run's git-ignored folder is not here).
    """

    name: str
    state: str
    reasons: tuple[str, ...] = ()
    note: str = ""

    @property
    def ok(self) -> bool:
        """Up to date or frozen."""
        return self.state in ("up to date", "frozen")


def _short(files: Iterable[str]) -> str:
    files = list(files)
    shown = ", ".join(files[:_SHOWN_FILES])
    more = len(files) - _SHOWN_FILES
    return shown + (f" and {more} more" if more > 0 else "")


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", *args], cwd=root, capture_output=True, text=True, check=False, timeout=60
    )


class Engine:
    """Status, runs, adoption and acceptance of a pipeline's stages.

    Args:
        pipeline: the declaration.
        work_dir: where stages stage their outputs and write their logs (git-ignored).
        echo: where progress lines go (default: print).
    """

    def __init__(
        self,
        pipeline: Pipeline,
        work_dir: Path | None = None,
        echo: Callable[[str], None] = print,
    ) -> None:
        self.pipeline = pipeline
        self.root = pipeline.root
        self.work_dir = work_dir or self.root / "results" / "tmp" / "reproduce"
        self.echo = echo
        self._inputs = {name: pipeline.inputs(s) for name, s in pipeline.stages.items()}
        self._order = pipeline.order()
        self._upstream = {name: pipeline.upstream(s) for name, s in pipeline.stages.items()}
        self._plan: list[str] = []  # the stages of the run under way (for progress lines)

    # ------------------------------------------------------------------ doit tasks
    def _config(self, stage: Stage) -> dict[str, Any]:
        return {
            "kind": stage.kind,
            "cmd": list(stage.cmd),
            "code": list(stage.code),
            "inputs": list(stage.inputs),
            "outputs": list(stage.outputs),
            "needs": list(stage.needs),
            "run": stage.run,
        }

    def _task(self, stage: Stage, forced: bool = False) -> Task:
        if stage.kind == "record":
            return Task(stage.name, None, targets=list(stage.outputs), uptodate=[True])
        uptodate: list[Any] = [config_changed(self._config(stage))]
        if forced:
            uptodate.append(False)
        actions: list[Any]
        if stage.kind == "manual":
            actions = [(self._review_action, [stage], {})]
        elif stage.kind == "train":
            actions = [(self._train_action, [stage], {})]
        else:
            actions = [(self._command_action, [stage], {})]
        return Task(
            stage.name,
            actions,
            # Relative paths (doit runs in the root): the lock's keys do not name the checkout.
            file_dep=list(self._inputs[stage.name]),
            targets=list(stage.outputs),
            task_dep=self._upstream[stage.name],
            uptodate=uptodate,
            verbosity=2,
            doc=stage.description,
        )

    def _tasks(self, forced: Iterable[str] = ()) -> list[Task]:
        forced = set(forced)
        return [self._task(self.pipeline.stages[n], n in forced) for n in self._order]

    def _dependency(self) -> Dependency:
        return Dependency(SortedJsonDB, str(self.pipeline.lock), checker_cls=ContentChecker)

    # ------------------------------------------------------------------ status
    def _own_status(self, dep: Dependency, task: Task, tasks: dict[str, Task]) -> StageStatus:
        stage = self.pipeline.stages[task.name]
        missing = [o for o in stage.outputs if not (self.root / o).exists()]
        if stage.kind == "record":
            if missing:
                return StageStatus(stage.name, "missing", (f"output missing: {_short(missing)}",))
            return StageStatus(stage.name, "frozen", (stage.reason or "",))
        recorded = dep._in(task.name)
        result = dep.get_status(task, tasks, get_log=True)
        reasons: list[str] = []
        if not recorded:
            reasons.append("no record in the lock (never run, nor adopted)")
        else:
            why = result.reasons
            if why.get("uptodate_false"):
                reasons.append("its declaration changed (command, kind or files)")
            if why.get("added_file_dep"):
                reasons.append(f"new inputs: {_short(sorted(why['added_file_dep']))}")
            if why.get("removed_file_dep"):
                reasons.append(f"inputs no longer read: {_short(sorted(why['removed_file_dep']))}")
            if why.get("changed_file_dep"):
                changed = sorted(why["changed_file_dep"])
                reasons.append(f"inputs changed: {_short(changed)}")
        absent_inputs = sorted(result.reasons.get("missing_file_dep", []))
        if absent_inputs:
            reasons.append(f"inputs missing: {_short(absent_inputs)}")
        note = ""
        if (
            stage.kind == "train"
            and not (self.root / "results" / "policies" / str(stage.run)).is_dir()
        ):
            note = f"results/policies/{stage.run}/ is not here (remade when a later stage needs it)"
        if missing:
            return StageStatus(
                stage.name, "missing", (f"output missing: {_short(missing)}", *reasons), note
            )
        if reasons:
            state = "review" if stage.kind == "manual" else "stale"
            return StageStatus(stage.name, state, tuple(reasons), note)
        return StageStatus(stage.name, "up to date", (), note)

    def status(self) -> dict[str, StageStatus]:
        """Every stage's state, in dependency order.

        A stage downstream of a stale one is stale too: its inputs change when that one runs.
        """
        with _in_dir(self.root):
            return self._status()

    def _status(self) -> dict[str, StageStatus]:
        tasks = {t.name: t for t in self._tasks()}
        dep = self._dependency()
        found: dict[str, StageStatus] = {}
        for name in self._order:
            own = self._own_status(dep, tasks[name], tasks)
            stale_up = [u for u in self._upstream[name] if not found[u].ok]
            if stale_up and own.ok:
                state = "review" if self.pipeline.stages[name].kind == "manual" else "stale"
                own = StageStatus(
                    name, state, (f"upstream not up to date: {', '.join(stale_up)}",), own.note
                )
            elif stale_up:
                own = StageStatus(
                    name,
                    own.state,
                    (*own.reasons, f"upstream not up to date: {', '.join(stale_up)}"),
                    own.note,
                )
            found[name] = own
        return found

    # ------------------------------------------------------------------ planning
    def _local_ok(self, train: Stage) -> bool:
        """Whether a train stage's run folder is here, with the model its manifest names."""
        manifest = self.root / (train.manifest or "")
        if not manifest.is_file():
            return False
        data = load_yaml_file(manifest) or {}
        model = self.root / str(data.get("model", ""))
        return model.is_file() and file_sha256(model) == data.get("model_sha256")

    def plan(self, names: Iterable[str] | None = None, force: Iterable[str] = ()) -> list[str]:
        """The stages a run would execute, in order.

        Args:
            names: the stages asked for (with their upstream stages); default: every stage.
            force: stages to run even when up to date.
        """
        status = self.status()
        wanted: list[str] = []
        todo = list(names) if names else list(self._order)
        while todo:
            name = todo.pop()
            if name in wanted:
                continue
            wanted.append(name)
            todo.extend(self._upstream[name])
        forced = set(force)
        run = [
            n
            for n in self._order
            if n in wanted and (n in forced or status[n].state in ("stale", "missing", "review"))
        ]
        # A stage that runs reads the run folders of the training stages it needs; when one
        # is not on this machine (they are git-ignored), its training stage runs first.
        for name in list(run):
            for need in self.pipeline.stages[name].needs:
                if need not in run and not self._local_ok(self.pipeline.stages[need]):
                    run.append(need)
        return [n for n in self._order if n in run]

    # ------------------------------------------------------------------ running
    def run(
        self, names: Iterable[str] | None = None, force: Iterable[str] = (), keep_going: bool = True
    ) -> int:
        """Run the stale stages (and the forced ones) through doit; 0 when all succeeded."""
        self._finish_promotions()
        plan = self.plan(names, force)
        if not plan:
            self.echo("reproduce: every stage asked for is up to date")
            return 0
        self._plan = plan
        self.echo(f"reproduce: {len(plan)} stage(s) to run: {', '.join(plan)}")
        forced = set(force) | {
            n for n in plan if self.pipeline.stages[n].kind == "train" and n not in (names or [])
        }
        tasks = self._tasks(forced=forced & set(plan))
        engine = self

        class _Loader(TaskLoader2):  # type: ignore[misc]
            def setup(self, opt_values: Any) -> None:
                pass

            def load_doit_config(self) -> dict[str, Any]:
                return {
                    "dep_file": str(engine.pipeline.lock),
                    "backend": "sorted-json",
                    "check_file_uptodate": ContentChecker,
                    "verbosity": 2,
                }

            def load_tasks(self, cmd: Any, pos_args: Any) -> list[Task]:
                return tasks

        main = DoitMain(
            _Loader(),
            config_filenames=(),
            extra_config={"BACKEND": {"sorted-json": "crius_gym.pipeline.lock:SortedJsonDB"}},
        )
        args = ["run", *(["--continue"] if keep_going else []), *plan]
        with _in_dir(self.root):
            return int(main.run(args))

    def _progress(self, stage: Stage, text: str) -> None:
        plan = self._plan or [stage.name]
        index = plan.index(stage.name) + 1 if stage.name in plan else 0
        now = _dt.datetime.now().strftime("%H:%M:%S")
        self.echo(f"[{now}] stage {index}/{len(plan)} {stage.name}: {text}")

    def _argv(self, command: str, out: Path) -> list[str]:
        text = command.replace("{out}", os.path.relpath(out, self.root))
        text = text.replace("{data}", str(self.pipeline.data_dir))
        argv = shlex.split(text)
        if argv and argv[0] == "python":
            argv[0] = sys.executable
        return argv

    def _execute(self, stage: Stage, argvs: list[list[str]], out: Path | None) -> bool:
        log = self.work_dir / f"{stage.name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env[STAGE_ENV] = stage.name
        env["CRIUS_GYM_DATA"] = str(self.pipeline.data_dir)
        if out is not None:
            env[STAGE_OUT_ENV] = os.path.relpath(out, self.root)
        started = time.monotonic()
        self._progress(stage, f"running (log: {os.path.relpath(log, self.root)})")
        with open(log, "a", encoding="utf-8") as fh:
            for argv in argvs:
                fh.write(f"\n$ {shlex.join(argv)}\n")
                fh.flush()
                code = subprocess.call(argv, cwd=self.root, env=env, stdout=fh, stderr=fh)
                if code != 0:
                    self._progress(stage, f"FAILED (exit {code}; see {log})")
                    return False
        self._progress(stage, f"done in {time.monotonic() - started:.0f} s")
        return True

    def _command_action(self, stage: Stage) -> bool | TaskFailed:
        staging = self.work_dir / stage.name / "out"
        if staging.exists():
            shutil.rmtree(staging)
        staging.mkdir(parents=True)
        ok = self._execute(stage, [self._argv(c, staging) for c in stage.cmd], staging)
        if not ok:
            return False
        absent = [o for o in stage.outputs if not (staging / _under_results(o)).is_file()]
        if absent:
            return TaskFailed(f"stage {stage.name} did not write {_short(absent)}")
        self._promote(stage.name, staging)
        return True

    def _journal(self, name: str) -> Path:
        return self.work_dir / name / "promote.json"

    def _promote(self, name: str, staging: Path) -> None:
        """Move a stage's staged files into ``results/``, rolled forward if interrupted."""
        files = sorted(
            str(p.relative_to(staging))
            for p in staging.rglob("*")
            if p.is_file() and not p.name.startswith(".")
        )
        journal = self._journal(name)
        with atomic_path(journal) as tmp:
            tmp.write_text(json.dumps({"staging": str(staging), "files": files}), encoding="utf-8")
        self._roll_forward(journal)

    def _roll_forward(self, journal: Path) -> None:
        data = json.loads(journal.read_text(encoding="utf-8"))
        staging = Path(data["staging"])
        for rel in data["files"]:
            src, dst = staging / rel, self.root / "results" / rel
            if src.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                os.replace(src, dst)
        journal.unlink()

    def _finish_promotions(self) -> None:
        if not self.work_dir.is_dir():
            return
        for journal in self.work_dir.glob("*/promote.json"):
            self.echo(f"reproduce: finishing the interrupted promotion of {journal.parent.name}")
            self._roll_forward(journal)

    def _review_action(self, stage: Stage) -> TaskFailed:
        self._progress(stage, "needs a person")
        return TaskFailed(
            f"{stage.name} is hand-written: rewrite {_short(stage.outputs)} against the new "
            f"results, then run `python experiments/reproduce.py --accept {stage.name}`"
        )

    # ------------------------------------------------------------------ training stages
    def _inputs_digest(self, stage: Stage) -> str:
        sha = hashlib.sha256(json.dumps(self._config(stage), sort_keys=True).encode())
        for f in self._inputs[stage.name]:
            path = self.root / f
            sha.update(f.encode())
            sha.update(file_sha256(path).encode() if path.is_file() else b"-")
        return sha.hexdigest()

    def _train_action(self, stage: Stage) -> bool | TaskFailed:
        run = stage.run or ""
        run_dir = self.root / "results" / "policies" / run
        state_file = self.work_dir / stage.name / "state.json"
        digest = self._inputs_digest(stage)
        state = json.loads(state_file.read_text()) if state_file.is_file() else {}
        meta_file = run_dir / "metadata.yaml"
        meta = load_yaml_file(meta_file) if meta_file.is_file() else None
        argvs = [self._argv(c, self.root / "results") for c in stage.cmd]
        if run_dir.is_dir() and state.get("digest") == digest and meta is not None:
            if meta.get("in_progress", True):
                self._progress(stage, f"resuming {run} from its last checkpoint")
                argvs[0] = [*argvs[0], "--resume", run]
            else:
                self._progress(stage, f"{run} finished earlier; writing its manifest")
                argvs = argvs[1:]
        elif run_dir.is_dir() or (self.root / "results" / "runs" / run).is_dir():
            stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
            aside = self.work_dir / stage.name / f"superseded-{stamp}"
            aside.mkdir(parents=True)
            for folder in ("policies", "runs"):
                old = self.root / "results" / folder / run
                if old.is_dir():
                    os.replace(old, aside / folder)
            self._progress(stage, f"inputs changed since {run} was made; old run moved to {aside}")
        with atomic_path(state_file) as tmp:
            tmp.write_text(json.dumps({"digest": digest}), encoding="utf-8")
        if argvs and not self._execute(stage, argvs, None):
            return False
        return self._write_manifest(stage)

    def _write_manifest(self, stage: Stage) -> bool | TaskFailed:
        run_dir = self.root / "results" / "policies" / (stage.run or "")
        meta_file = run_dir / "metadata.yaml"
        if not meta_file.is_file():
            return TaskFailed(f"{stage.name}: {meta_file} was not written")
        meta = load_yaml_file(meta_file) or {}
        if meta.get("in_progress", False):
            return TaskFailed(f"{stage.name}: {meta_file} says the run is still in progress")
        model = run_dir / "best_model.zip"
        if not model.is_file():
            model = run_dir / "model.zip"
        manifest = {
            "stage": stage.name,
            "run": stage.run,
            "note": "a training run's record; the run folder itself is git-ignored",
            "model": os.path.relpath(model, self.root),
            "model_sha256": file_sha256(model),
            # The zip's other members carry run metadata; the weights are policy.pth.
            "weights_sha256": _member_sha256(model, "policy.pth"),
            "command": meta.get("command"),
            "git_revision": meta.get("git_revision"),
            "date": meta.get("date"),
            "sessions": meta.get("sessions"),
            "timesteps": meta.get("timesteps"),
            "train_seconds": meta.get("train_seconds"),
            "best_validation": meta.get("best_validation"),
        }
        target = self.root / (stage.manifest or "")
        with atomic_path(target) as tmp:
            tmp.write_text(yaml.safe_dump(manifest, sort_keys=False), encoding="utf-8")
        return True

    # ------------------------------------------------------------------ records
    def accept(self, names: Iterable[str]) -> list[str]:
        """Record stages as up to date with their current inputs; returns what was recorded.

        For hand-written stages, once a person has rewritten them against the new results.
        """
        tasks = {t.name: t for t in self._tasks()}
        dep = self._dependency()
        done: list[str] = []
        with _in_dir(self.root):
            self._save(dep, tasks, names, done)
        dep.close()
        return done

    @staticmethod
    def _save(
        dep: Dependency, tasks: dict[str, Task], names: Iterable[str], done: list[str]
    ) -> None:
        for name in names:
            task = tasks[name]
            dep.get_status(task, tasks)
            task.save_extra_values()
            dep.save_success(task)
            done.append(name)

    def stated_revision(self, stage: Stage) -> str | None:
        """The git revision a stage's committed outputs state (reports, metadata).

        For a hand-written stage: the last commit that changed it.
        """
        if stage.kind == "manual":
            out = _git(self.root, "log", "-1", "--format=%H", "--", *stage.outputs).stdout.strip()
            return out or None
        for rel in stage.outputs:
            path = self.root / rel
            if path.suffix not in (".md", ".yaml") or not path.is_file():
                continue
            match = _REVISION.search(path.read_text(encoding="utf-8", errors="replace"))
            if match:
                return match.group(1)
        return None

    def adopt(self) -> dict[str, str]:
        """Record unrecorded stages as up to date where git shows their inputs unchanged.

        A stage is adopted when every input it declares is the same, by git, at the revision its
        outputs state and at HEAD, and its upstream stages are up to date.

        Returns:
            stage → what was decided, in words.
        """
        decided: dict[str, str] = {}
        status = self.status()
        for name in self._order:
            stage = self.pipeline.stages[name]
            if status[name].state != "stale" and status[name].state != "review":
                decided[name] = status[name].state
                continue
            if not any("no record in the lock" in r for r in status[name].reasons) and not any(
                r.startswith("upstream") for r in status[name].reasons
            ):
                decided[name] = "not adopted: recorded in the lock, and stale by it"
                continue
            if any(not (self.root / o).exists() for o in stage.outputs):
                decided[name] = "not adopted: an output is missing"
                continue
            if any(
                decided.get(u) not in ("up to date", "adopted", "frozen")
                for u in self._upstream[name]
            ):
                decided[name] = "not adopted: an upstream stage is not up to date"
                continue
            revision = self.stated_revision(stage)
            if revision is None:
                decided[name] = "not adopted: its outputs state no git revision"
                continue
            tracked = [
                f
                for f in self._inputs[name]
                if not f.startswith("..")
                and _git(self.root, "ls-files", "--error-unmatch", f).returncode == 0
            ]
            untracked_in_repo = [
                f for f in self._inputs[name] if not f.startswith("..") and f not in tracked
            ]
            if untracked_in_repo:
                decided[name] = f"not adopted: inputs not in git: {_short(untracked_in_repo)}"
                continue
            diff = _git(self.root, "diff", "--name-only", revision, "HEAD", "--", *tracked)
            if diff.returncode != 0:
                decided[name] = (
                    f"not adopted: git diff against {revision} failed: {diff.stderr.strip()}"
                )
                continue
            changed = diff.stdout.split()
            if changed:
                decided[name] = f"not adopted: changed since git {revision}: {_short(changed)}"
                continue
            self.accept([name])
            decided[name] = "adopted"
        return decided


@contextlib.contextmanager
def _in_dir(path: Path) -> Iterator[None]:
    """Work in ``path`` (doit resolves the relative input paths against the working directory)."""
    cwd = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(cwd)


def _member_sha256(archive: Path, member: str) -> str | None:
    """SHA-256 of one member of a zip file (None if it has no such member)."""
    with zipfile.ZipFile(archive) as zf:
        if member not in zf.namelist():
            return None
        return hashlib.sha256(zf.read(member)).hexdigest()


def _under_results(output: str) -> str:
    """``results/a/b.md`` → ``a/b.md`` (the path inside a staging copy of ``results/``)."""
    return output.split("/", 1)[1]
