"""The pipeline's declaration: stages, their inputs and outputs, read from YAML.

A stage is one of four kinds:

* ``command``: runs its commands with ``{out}`` standing for a staging copy of ``results/``;
  the outputs are moved into ``results/`` only when every command succeeded, so a killed stage
  leaves the previous outputs intact.
* ``train``: a training run, resumable: ``train_ppo.py`` writes ``results/policies/<run>/``
  (git-ignored) in place and resumes from its last checkpoint; the stage's committed output is a
  manifest of the run (the model's hash, its command and revision), on which later stages
  depend.
* ``manual``: a hand-written commentary on other stages' outputs; stale when they change, made
  up to date by a person (``reproduce.py --accept NAME`` once it is rewritten).
* ``record``: a superseded report kept as the record of an earlier configuration; frozen, never
  rerun (DVC calls such stages frozen).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crius_gym.errors import ConfigError, InputFileError
from crius_gym.pipeline.imports import import_closure
from crius_gym.yamlfile import load_yaml_file

KINDS = ("command", "train", "manual", "record")
_STAGE_KEYS = {
    "kind",
    "description",
    "cmd",
    "code",
    "inputs",
    "outputs",
    "needs",
    "run",
    "reason",
}


@dataclass(frozen=True)
class Stage:
    """One stage of the pipeline.

    Attributes:
        name: unique name (``--stage NAME``).
        kind: ``command``, ``train``, ``manual`` or ``record``.
        description: one line for ``--status``.
        cmd: shell-free commands (argument lists after ``{placeholder}`` expansion).
        code: Python files whose import closure is an input.
        inputs: other input files or globs, relative to the repository (``{data}``: the public
            data directory).
        outputs: committed output files, relative to the repository (under ``results/``).
        needs: ``train`` stages whose git-ignored run folders this stage reads.
        run: the run name of a ``train`` stage (``results/policies/<run>/``).
        reason: why a ``record`` stage is frozen.
    """

    name: str
    kind: str
    description: str
    cmd: tuple[str, ...] = ()
    code: tuple[str, ...] = ()
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    needs: tuple[str, ...] = ()
    run: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        where = f"stage {self.name!r}"
        if self.kind not in KINDS:
            raise ConfigError(f"{where}: kind {self.kind!r} is not one of {', '.join(KINDS)}")
        if self.kind in ("command", "train") and not self.cmd:
            raise ConfigError(f"{where}: a {self.kind} stage needs 'cmd'")
        if self.kind == "train" and not self.run:
            raise ConfigError(f"{where}: a train stage needs 'run' (its run name)")
        if self.kind == "record" and not self.reason:
            raise ConfigError(f"{where}: a record stage needs 'reason' (why it is frozen)")
        if not self.outputs:
            raise ConfigError(f"{where}: no 'outputs'")
        for out in self.outputs:
            if not out.startswith("results/"):
                raise ConfigError(f"{where}: output {out!r} is not under results/")

    @property
    def manifest(self) -> str | None:
        """The committed manifest of a ``train`` stage (its first output)."""
        return self.outputs[0] if self.kind == "train" else None


@dataclass(frozen=True)
class Pipeline:
    """The declared stages and where things are.

    Attributes:
        root: the repository root.
        stages: stages by name, in declaration order.
        data_dir: the public data directory (``{data}``).
        lock: the lock file (content hashes of each stage's inputs).
        dynamic_imports: module → packages it imports by discovery (see ``import_closure``).
        declaration: the YAML file the stages came from.
    """

    root: Path
    stages: dict[str, Stage]
    data_dir: Path
    lock: Path
    dynamic_imports: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    declaration: Path | None = None
    _inputs: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)

    def expand(self, pattern: str) -> list[str]:
        """Files matching an input pattern, relative to the root (the pattern itself if none)."""
        text = pattern.replace("{data}", str(self.data_dir))
        if not any(ch in text for ch in "*?["):
            return [_relative(self.root, Path(text))]
        found = sorted(glob.glob(str(self.root / text), recursive=True))
        return [_relative(self.root, Path(p)) for p in found if Path(p).is_file()] or [text]

    def producer(self) -> dict[str, str]:
        """Output path → the stage that makes it."""
        made: dict[str, str] = {}
        for stage in self.stages.values():
            for out in stage.outputs:
                made[out] = stage.name
        return made

    def inputs(self, stage: Stage) -> list[str]:
        """Every input file of a stage, sorted.

        The import closure of its code, its declared inputs and the manifests of the training
        runs it needs (the stage's own declaration is checked as a value, not a file).
        """
        cached = self._inputs.get(stage.name)
        if cached is not None:
            return list(cached)
        files: set[str] = set()
        if stage.code:
            closure = import_closure(self.root, stage.code, self.dynamic_imports)
            files.update(str(p) for p in closure)
        for pattern in stage.inputs:
            files.update(self.expand(pattern))
        for need in stage.needs:
            manifest = self.stages[need].manifest
            if manifest:
                files.add(manifest)
        self._inputs[stage.name] = sorted(files)
        return list(self._inputs[stage.name])

    def upstream(self, stage: Stage) -> list[str]:
        """Stages whose outputs this stage reads (direct only)."""
        made = self.producer()
        names = {made[f] for f in self.inputs(stage) if f in made}
        names.update(stage.needs)
        names.discard(stage.name)
        return sorted(names)

    def order(self) -> list[str]:
        """Stage names in a dependency order (upstream first), declaration order otherwise."""
        placed: list[str] = []
        visiting: set[str] = set()

        def visit(name: str) -> None:
            if name in placed:
                return
            if name in visiting:
                raise ConfigError(f"{self.declaration}: stages form a cycle through {name!r}")
            visiting.add(name)
            for up in self.upstream(self.stages[name]):
                visit(up)
            visiting.discard(name)
            placed.append(name)

        for name in self.stages:
            visit(name)
        return placed


def _relative(root: Path, path: Path) -> str:
    """``path`` relative to ``root`` (``../shared/data/…`` for data beside the repository)."""
    full = path if path.is_absolute() else root / path
    return os.path.relpath(os.path.normpath(full), root)


def _as_tuple(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise ConfigError(f"{where}: expected a string or a list of strings, got {value!r}")


def load_pipeline(
    path: str | Path, data_dir: str | Path | None = None, root: str | Path | None = None
) -> Pipeline:
    """Read a pipeline declaration.

    Args:
        path: the YAML file (``experiments/pipeline.yaml``); its keys are ``lock``,
            ``dynamic_imports`` and ``stages`` (name → stage fields, see :class:`Stage`).
        data_dir: the public data directory; default: the file's ``data_dir`` resolved against
            the repository root.
        root: the repository root; default: the git work tree holding ``path``.

    Returns:
        The pipeline.

    Raises:
        ConfigError: the file is malformed (names the file and the stage).
    """
    path = Path(path).resolve()
    try:
        raw = load_yaml_file(path)
    except InputFileError as exc:
        raise ConfigError(f"{path}: cannot read the pipeline declaration: {exc}") from exc
    if not isinstance(raw, dict) or not isinstance(raw.get("stages"), dict):
        raise ConfigError(f"{path}: expected a mapping with 'stages'")
    unknown = set(raw) - {"lock", "data_dir", "dynamic_imports", "stages"}
    if unknown:
        raise ConfigError(f"{path}: unknown keys {sorted(unknown)}")
    if root is None:
        root = path.parent
        while not (root / ".git").exists():
            if root.parent == root:
                raise ConfigError(f"{path}: not inside a git work tree; pass the root")
            root = root.parent
    root = Path(root).resolve()
    stages: dict[str, Stage] = {}
    for name, body in raw["stages"].items():
        where = f"{path}: stage {name!r}"
        if not isinstance(body, dict):
            raise ConfigError(f"{where}: expected a mapping")
        bad = set(body) - _STAGE_KEYS
        if bad:
            raise ConfigError(f"{where}: unknown keys {sorted(bad)} (known: {sorted(_STAGE_KEYS)})")
        try:
            stages[str(name)] = Stage(
                name=str(name),
                kind=str(body.get("kind", "command")),
                description=str(body.get("description", "")),
                cmd=_as_tuple(body.get("cmd"), f"{where}: cmd"),
                code=_as_tuple(body.get("code"), f"{where}: code"),
                inputs=_as_tuple(body.get("inputs"), f"{where}: inputs"),
                outputs=_as_tuple(body.get("outputs"), f"{where}: outputs"),
                needs=_as_tuple(body.get("needs"), f"{where}: needs"),
                run=body.get("run"),
                reason=body.get("reason"),
            )
        except ConfigError as exc:
            raise ConfigError(f"{path}: {exc}") from exc
    for stage in stages.values():
        for need in stage.needs:
            if need not in stages or stages[need].kind != "train":
                raise ConfigError(f"{path}: stage {stage.name!r} needs {need!r}, not a train stage")
    made: dict[str, str] = {}
    for stage in stages.values():
        for out in stage.outputs:
            if out in made:
                raise ConfigError(
                    f"{path}: {out} is an output of both {made[out]!r} and {stage.name!r}"
                )
            made[out] = stage.name
    dynamic = {
        str(k): _as_tuple(v, f"{path}: dynamic_imports")
        for k, v in (raw.get("dynamic_imports") or {}).items()
    }
    if data_dir is None:
        # As every script: $CRIUS_GYM_DATA, else the declaration's data_dir (../shared/data).
        data_dir = os.environ.get("CRIUS_GYM_DATA") or root / str(
            raw.get("data_dir", "../shared/data")
        )
    pipeline = Pipeline(
        root=root,
        stages=stages,
        data_dir=Path(data_dir).resolve(),
        lock=root / str(raw.get("lock", "results/pipeline.lock.json")),
        dynamic_imports=dynamic,
        declaration=path,
    )
    pipeline.order()  # refuse cycles now
    return pipeline
