"""Atomic writes leave files with the usual permissions and clean up after killed writers
(issue 14, item 9)."""

import os
import time

from crius_gym.atomic import atomic_path, atomic_write_text


def test_written_file_has_the_umask_mode(tmp_path):
    mask = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "r.md", "x")
    finally:
        os.umask(mask)
    mode = (tmp_path / "r.md").stat().st_mode & 0o777
    assert mode == 0o666 & ~mask


def test_stale_temporary_file_of_a_killed_writer_is_removed(tmp_path):
    stale = tmp_path / ".r.md.abc123.md"
    stale.write_text("")
    old = time.time() - 3600
    os.utime(stale, (old, old))
    fresh = tmp_path / ".r.md.def456.md"  # may belong to a writer still running
    fresh.write_text("")
    atomic_write_text(tmp_path / "r.md", "x")
    assert not stale.exists() and fresh.exists()
    assert (tmp_path / "r.md").read_text() == "x"


def test_failed_write_keeps_the_old_file(tmp_path):
    atomic_write_text(tmp_path / "r.md", "old")
    try:
        with atomic_path(tmp_path / "r.md") as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    except RuntimeError:
        pass
    assert (tmp_path / "r.md").read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["r.md"]
