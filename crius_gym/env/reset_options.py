"""The options of ``CriusEnv.reset``: which trace an episode replays, and from when.

Every key is checked before anything runs: an unknown key, split, index or component is an error
that names it, never ignored (Gymnasium leaves ``options`` to the env; a typo must not silently
give a training episode instead of a held-out one).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from crius_gym.errors import ConfigError
from crius_gym.scenarios import Scenario
from crius_gym.workload.job import Trace

#: The keys ``reset(options=...)`` understands (see :class:`~crius_gym.env.cluster_env.CriusEnv`).
RESET_OPTIONS = frozenset(
    {"trace", "trace_format", "trace_seed", "split", "index", "component", "start_s"}
)


def checked_reset_options(
    options: Mapping[str, Any] | None, scenario: Scenario, has_guide: bool
) -> dict[str, Any]:
    """``reset`` options as a dict, refused when a key or value is unknown or out of range.

    Args:
        options: what ``reset`` was given.
        scenario: the env's scenario (its components and split sizes bound the indices).
        has_guide: whether the env has a guide (a mid-trace start needs one).

    Raises:
        ConfigError: naming the option and what it accepts.
    """
    opts = dict(options or {})
    unknown = sorted(set(opts) - RESET_OPTIONS)
    if unknown:
        raise ConfigError(
            f"reset options: unknown key(s) {unknown}; known: {sorted(RESET_OPTIONS)}"
        )
    if "trace" in opts and "split" in opts:
        raise ConfigError("reset options: give 'trace' or 'split', not both")
    split = opts.get("split")
    if split is not None and split not in ("train", "val", "test"):
        raise ConfigError(f"reset options: split {split!r} not in ['train', 'val', 'test']")
    for key in ("index", "component"):
        if key in opts and (
            isinstance(opts[key], bool) or not isinstance(opts[key], int | np.integer)
        ):
            raise ConfigError(f"reset options: {key} must be an integer, got {opts[key]!r}")
    n_components = max(1, len(scenario.mix))
    component = int(opts.get("component", 0))
    if not 0 <= component < n_components:
        raise ConfigError(
            f"reset options: component {component} out of range (the scenario has {n_components})"
        )
    if split in ("val", "test") and "index" in opts:
        sc = [c for c, _ in scenario.mix][component] if scenario.mix else scenario
        count = sc.splits.validation_traces if split == "val" else sc.splits.test_traces
        if not 0 <= int(opts["index"]) < count:
            raise ConfigError(
                f"reset options: index {opts['index']} out of range: {sc.name} has {count} "
                f"{split} traces"
            )
    if "index" in opts and int(opts["index"]) < 0:
        raise ConfigError(f"reset options: index must be >= 0, got {opts['index']}")
    if "trace" in opts and not isinstance(opts["trace"], Trace | str | os.PathLike):
        raise ConfigError(
            "reset options: trace must be a Trace or a trace file's path, got "
            f"{type(opts['trace']).__name__}"
        )
    if ("trace_format" in opts or "trace_seed" in opts) and isinstance(
        opts.get("trace"), Trace | None
    ):
        raise ConfigError("reset options: trace_format and trace_seed need a trace file")
    if "start_s" in opts:
        start = opts["start_s"]
        if isinstance(start, bool) or not isinstance(start, int | float | np.number):
            raise ConfigError(f"reset options: start_s must be a number of seconds, got {start!r}")
        if not float(start) >= 0:
            raise ConfigError(f"reset options: start_s must be >= 0, got {start!r}")
        if not has_guide:
            raise ConfigError("reset options: start_s needs a guide (it schedules until then)")
    return opts
