"""Atomic file writes: results and checkpoints are never left half-written.

Each helper writes to a temporary file in the destination directory and renames it over the
target (``os.replace`` is atomic on POSIX), so an interrupted run leaves either the old file or
the new one. The written file gets the usual permissions (0666 less the umask), not the 0600 of
a temporary file, and a temporary file left behind by a killed writer is removed by the next
successful write of the same target.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from crius_gym.errors import RunStateError


def _read_umask() -> int:
    mask = os.umask(0)  # the only portable way to read it: set and restore at once
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_read_umask()
_STALE_TEMP_S = 600.0  # older temporary files of a target are left-overs of a killed writer


def _remove_stale_temps(target: Path) -> None:
    now = time.time()
    for old in target.parent.glob(f".{target.name}.*{target.suffix}"):
        with contextlib.suppress(OSError):
            if now - old.stat().st_mtime > _STALE_TEMP_S:
                old.unlink()


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path``.

    Example:
        >>> with atomic_path("out.png") as tmp:  # doctest: +SKIP
        ...     fig.savefig(tmp)
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(
        prefix=f".{target.name}.", suffix=target.suffix, dir=target.parent
    )
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        yield tmp
        os.chmod(tmp, _FILE_MODE)
        os.replace(tmp, target)
        _remove_stale_temps(target)
    finally:
        if tmp.exists():
            tmp.unlink()


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def fresh_run_dir(script: str, root: str | Path = "results/tmp") -> Path:
    """A new output folder ``<root>/<script>-<date>-<time>`` (the scripts' default ``--out``).

    ``results/tmp/`` is git-ignored, so a default run never touches committed reports.
    """
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"{script}-{stamp}"


def refuse_overwrite(paths: list[Path], force: bool) -> None:
    """Refuse to write over existing outputs unless ``force`` (a script's ``--force``).

    Raises:
        RunStateError: naming the existing files or non-empty folders.
    """
    existing = [p for p in paths if p.is_file() or (p.is_dir() and any(p.iterdir()))]
    if existing and not force:
        shown = ", ".join(str(p) for p in existing[:4]) + (" ..." if len(existing) > 4 else "")
        raise RunStateError(
            f"would overwrite {shown}; pass --force to replace, or choose another --out"
        )
