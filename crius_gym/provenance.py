"""Provenance of results: the command, date, package version and git revision.

Every file under ``results/`` and every saved policy records these, so that a number can be
traced back to the command that produced it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from crius_gym import __version__


def git_revision(cwd: str | Path | None = None) -> str:
    """Current git commit (with ``-dirty`` when the tree has changes), or ``unknown``."""
    where = Path(cwd) if cwd else Path(__file__).resolve().parent
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "--short=12", "HEAD"],
            cwd=where,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=where,
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev + ("-dirty" if dirty else "")


def command_line(argv: list[str] | None = None) -> str:
    """The command as typed: ``python <script> <args>`` with shell quoting."""
    args = list(sys.argv if argv is None else argv)
    if args and args[0].endswith(".py"):
        with contextlib.suppress(ValueError):
            args[0] = str(Path(args[0]).resolve().relative_to(Path.cwd()))
        return "python " + shlex.join(args)
    return shlex.join(args)


@dataclass(frozen=True)
class Provenance:
    """Who produced a result, and how.

    Attributes:
        command: the command line.
        date: UTC timestamp, ISO 8601.
        version: crius_gym version.
        git_revision: git commit of the code.
    """

    command: str
    date: str
    version: str
    git_revision: str
    stage: str | None = None

    @classmethod
    def capture(cls, argv: list[str] | None = None) -> Provenance:
        """Provenance of the running process.

        Under ``experiments/reproduce.py`` the environment names the pipeline stage and the
        staging folder its outputs are written to before they are moved into ``results/``;
        the command is then stated as it reads with ``results/`` in place of the staging folder
        (what it wrote is what that command writes), and the stage is named.
        """
        now = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
        command = command_line(argv)
        staging = os.environ.get("CRIUS_GYM_STAGE_OUT")
        if staging:
            command = command.replace(staging, "results")
        return cls(
            command=command,
            date=now,
            version=__version__,
            git_revision=git_revision(),
            stage=os.environ.get("CRIUS_GYM_STAGE") or None,
        )

    def markdown(self) -> str:
        """A short Markdown paragraph for reports."""
        text = (
            f"Produced by `{self.command}` on {self.date} "
            f"(crius_gym {self.version}, git {self.git_revision})."
        )
        if self.stage:
            text += "\n\n" + stage_line(self.stage)
        return text

    def as_dict(self) -> dict[str, str]:
        """Plain mapping for YAML/JSON."""
        out = {
            "command": self.command,
            "date": self.date,
            "version": self.version,
            "git_revision": self.git_revision,
        }
        if self.stage:
            out["stage"] = self.stage
        return out


def stage_line(stage: str) -> str:
    """The line a report carries to name the pipeline stage that makes it."""
    return (
        f"Pipeline stage: `{stage}` (`experiments/pipeline.yaml`; regenerate with "
        f"`python experiments/reproduce.py --stage {stage}`)."
    )
