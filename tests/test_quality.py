"""Lint and type checks run with the tests (ruff and mypy come with the dev extra)."""

import importlib.util
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="ruff not installed")
def test_ruff_clean():
    out = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "crius_gym", "experiments", "tests"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_clean():
    pytest.importorskip("mypy")
    out = subprocess.run(
        [sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
