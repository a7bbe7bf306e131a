"""Shared fixtures: the public data directory (tests that need a file skip when it is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crius_gym import datasets

REPO = Path(__file__).resolve().parents[1]


def require_data(relative: Path) -> Path:
    """Path of a public data file, or skip the test saying which file is missing."""
    path = datasets.data_dir() / relative
    if not path.is_file():
        pytest.skip(f"public data file {path} absent (set {datasets.ENV_VAR})")
    return path


@pytest.fixture
def arena_measurements() -> Path:
    return require_data(datasets.ARENA_MEASUREMENTS)


@pytest.fixture
def arena_model_configs() -> Path:
    return require_data(datasets.ARENA_MODEL_CONFIGS)


@pytest.fixture
def megatron_table1() -> Path:
    return require_data(datasets.MEGATRON_TABLE1)
