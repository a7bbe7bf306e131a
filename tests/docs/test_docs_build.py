"""The documentation site builds with warnings as errors (broken links, bad docstrings)."""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import REPO


def test_mkdocs_build_strict(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-4000:]
    page = (tmp_path / "api" / "policy" / "index.html").read_text(encoding="utf-8")
    assert "decide" in page and "Snapshot" in page  # the reference is generated, not empty
    assert (tmp_path / "tutorials" / "heuristic" / "index.html").is_file()
