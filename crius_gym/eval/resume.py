"""Finished runs kept on disk, so a killed evaluation or baseline run resumes where it stopped.

``evaluate.py`` and ``run_baselines.py`` run many independent (policy, trace) simulations, then
write their tables. Each finished run is stored here (``<out>/.partial/<key>.pkl``, written
atomically) under a key made of everything that determines it: the task itself (policy, trace,
seed, options), the saved model's bytes for an agent, and the package's source code. Running
the same command again with the same ``--out`` loads the stored runs and computes only the
rest; the simulator is deterministic, so the tables equal those of an uninterrupted run. The
folder is removed once the reports are written.
"""

from __future__ import annotations

import functools
import hashlib
import pickle
import shutil
from pathlib import Path
from typing import Any

from crius_gym.atomic import atomic_path

PARTIAL_DIR = ".partial"


@functools.cache
def code_digest() -> str:
    """SHA-256 of the package's Python sources: a stored run is reused only by the same code."""
    root = Path(__file__).resolve().parents[1]
    sha = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        sha.update(str(path.relative_to(root)).encode())
        sha.update(path.read_bytes())
    return sha.hexdigest()


def file_digest(path: str | Path) -> str:
    """SHA-256 of a file's bytes (a saved model: same name, other weights, other key)."""
    sha = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()


def policy_source_digest(name: str) -> str | None:
    """SHA-256 of a plug-in policy's source file (``file.py:Class`` or ``module:Class``).

    The package's own policies are covered by :func:`code_digest`; a user's plug-in is not, so
    an edited plug-in gets new keys and its runs are redone.
    """
    if ":" not in name:
        return None
    target = name.rsplit(":", 1)[0]
    if target.endswith(".py"):
        return file_digest(target) if Path(target).is_file() else None
    import importlib.util

    try:
        spec = importlib.util.find_spec(target)
    except (ImportError, ValueError):
        return None
    origin = spec.origin if spec is not None else None
    return file_digest(origin) if origin and Path(origin).is_file() else None


class RunStore:
    """Finished runs of one output folder, keyed by what determines them.

    Args:
        out: the script's ``--out`` folder; runs live in ``out/.partial/``.
    """

    def __init__(self, out: str | Path) -> None:
        self.folder = Path(out) / PARTIAL_DIR
        self.reused = 0

    def key(self, *parts: Any) -> str:
        """The key of a run determined by ``parts`` (picklable) and the package's code."""
        sha = hashlib.sha256(code_digest().encode())
        sha.update(pickle.dumps(parts, protocol=4))
        return sha.hexdigest()

    def get(self, key: str) -> Any | None:
        """The stored run, or None (also for an unreadable file: the run is simply redone)."""
        path = self.folder / f"{key}.pkl"
        if not path.is_file():
            return None
        try:
            value = pickle.loads(path.read_bytes())
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
            return None
        self.reused += 1
        return value

    def put(self, key: str, value: Any) -> None:
        """Store a finished run (atomically: a kill leaves the old state, never half a file)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(self.folder / f"{key}.pkl") as tmp:
            Path(tmp).write_bytes(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))

    def clear(self) -> None:
        """Remove the stored runs (after the reports are written)."""
        shutil.rmtree(self.folder, ignore_errors=True)
