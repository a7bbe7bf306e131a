"""The lock file: content hashes of every stage's inputs, committed next to the results.

doit keeps a record of each task's file dependencies; these two plug-ins make that record a lock
file fit for git: :class:`ContentChecker` records a SHA-256 of each input and nothing else (no
timestamps, so a fresh clone with new modification times is still up to date, and a file
changed and changed back is not stale), and :class:`SortedJsonDB` writes the record as sorted,
indented JSON (readable diffs) and atomically (a killed run leaves the previous lock).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from doit.dependency import FileChangedChecker, JsonDB

from crius_gym.atomic import atomic_path
from crius_gym.eval.resume import file_digest

_HASHES: dict[tuple[str, int, int], str] = {}


def file_sha256(path: str | Path) -> str:
    """SHA-256 hex digest of a file's bytes (memoised per path, size and mtime)."""
    stat = os.stat(path)
    key = (str(path), stat.st_size, stat.st_mtime_ns)
    digest = _HASHES.get(key)
    if digest is None:
        digest = _HASHES[key] = file_digest(path)
    return digest


class ContentChecker(FileChangedChecker):  # type: ignore[misc]
    """A doit checker that compares content hashes only.

    The state recorded for a dependency is ``"sha256:<hex>"``. doit's default checker trusts an
    unchanged modification time; this one always hashes (memoised within a process).
    """

    def check_modified(self, file_path: str, file_stat: Any, state: Any) -> bool:
        """Whether the file's content differs from the recorded state."""
        return bool(state != f"sha256:{file_sha256(file_path)}")

    def get_state(self, dep: str, current_state: Any) -> str | None:
        """The state to record after a successful run (``None``: unchanged)."""
        state = f"sha256:{file_sha256(dep)}"
        return None if state == current_state else state


class SortedJsonDB(JsonDB):  # type: ignore[misc]
    """doit's JSON backend, written sorted, indented and atomically."""

    desc = "sorted, indented JSON written atomically (a lock file for git)"

    def set(self, task_id: str, dependency: str, value: Any) -> None:
        """Store a value, and write the record once a task has finished.

        ``deps:`` is the last value doit stores for a finished task: writing the record then
        means a run killed later does not redo the stages it finished.
        """
        super().set(task_id, dependency, value)
        if dependency == "deps:":
            self.dump()

    def remove(self, task_id: str) -> None:
        """Forget a task's record."""
        super().remove(task_id)
        self.dump()

    def dump(self) -> None:
        """Write the record (keys sorted, one dependency per line)."""
        data = {
            task: {key: sorted(value) if key == "deps:" else value for key, value in entry.items()}
            for task, entry in self._db.items()
        }
        with atomic_path(self.name) as tmp:
            Path(tmp).write_text(
                json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8"
            )
