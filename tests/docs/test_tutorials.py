"""The tutorials under docs/tutorials/ run as written, block by block, from an empty folder.

A Python block runs in one namespace per page (a tutorial builds up); a ``bash`` block marked
``<!-- runnable -->`` runs in a shell with this interpreter's scripts on ``PATH`` (the console
scripts of ``pip install -e .``); a block marked ``<!-- file: NAME -->`` is saved as NAME.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

TUTORIALS = sorted((REPO / "docs" / "tutorials").glob("*.md"))
BLOCK = re.compile(r"(?P<before>[^\n]*)\n```(?P<lang>\w+)\n(?P<code>.*?)\n```", re.DOTALL)


def _blocks(page: Path) -> list[tuple[int, str, str, str]]:
    """(line, marker, language, code) of every fenced block."""
    text = page.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, m.start("code")) + 1, m["before"].strip(), m["lang"], m["code"])
        for m in BLOCK.finditer(text)
    ]


def test_there_are_two_tutorials():
    assert {p.stem for p in TUTORIALS} == {"heuristic", "sb3_agent"}


@pytest.mark.parametrize("page", TUTORIALS, ids=lambda p: p.stem)
def test_tutorial_runs(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # as `python` started in this folder
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    namespace: dict[str, object] = {"__name__": f"tutorial_{page.stem}"}
    ran = 0
    try:
        for line, marker, lang, code in _blocks(page):
            where = f"{page.relative_to(REPO)}:{line}"
            if marker.startswith("<!-- file:"):
                name = marker.removeprefix("<!-- file:").removesuffix("-->").strip()
                (tmp_path / name).write_text(code + "\n", encoding="utf-8")
            elif lang == "python":
                exec(compile(code, where, "exec"), namespace)
            elif lang == "bash" and marker == "<!-- runnable -->":
                out = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", code],
                    cwd=tmp_path,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=600,
                    check=False,
                )
                assert out.returncode == 0, f"{where}:\n{out.stderr[-3000:]}"
            else:
                continue
            ran += 1
    finally:
        for mod in [m for m in sys.modules if m == "my_sched"]:
            del sys.modules[mod]
    assert ran >= 3, f"{page.name}: only {ran} blocks ran (markers lost?)"
