"""Where the scenario files and agent hyperparameters live.

The repository keeps one copy of each, in the top-level ``envs/`` and ``agents/`` folders where
users look for them. A wheel carries a copy made at build time (``setup.py``) under
``crius_gym/_bundled/``, so an installed package runs from any directory. A source checkout
(or an editable install) reads the top-level folders; ``$CRIUS_GYM_ENVS`` overrides the scenario
folder in both cases. This module imports nothing heavy: ``import crius_gym`` uses it to
register the environment ids.
"""

from __future__ import annotations

import os
from pathlib import Path

ENVS_VAR = "CRIUS_GYM_ENVS"
_PACKAGE = Path(__file__).resolve().parent


def _folder(name: str) -> Path:
    checkout = _PACKAGE.parent / name
    if checkout.is_dir() and (_PACKAGE.parent / "pyproject.toml").is_file():
        return checkout
    return _PACKAGE / "_bundled" / name


def scenario_dir() -> Path:
    """Directory of scenario files: ``$CRIUS_GYM_ENVS``, a checkout's ``envs/``, or the wheel's."""
    env = os.environ.get(ENVS_VAR)
    return Path(env) if env else _folder("envs")


def agents_dir() -> Path:
    """Directory of agent hyperparameter files: a checkout's ``agents/``, or the wheel's."""
    return _folder("agents")


def list_scenarios() -> tuple[str, ...]:
    """Names of the scenario files in :func:`scenario_dir`."""
    return tuple(sorted(p.stem for p in scenario_dir().glob("*.yaml")))
