"""The traces a comparison runs on: a scenario's named set, or given trace files.

One implementation behind ``evaluate.py`` and ``run_baselines.py`` (``--traces``,
``--max-traces``, ``--trace FILE``), so both scripts mean the same traces by the same words.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from crius_gym.errors import ConfigError

if TYPE_CHECKING:  # light at import: the scripts' --help reads TRACE_SETS
    from crius_gym.perf.tuner import Tuner
    from crius_gym.scenarios import Scenario
    from crius_gym.workload.job import Trace

TraceSet = Literal["test", "val", "own", "all"]

#: ``--traces`` choices and what each means (the scripts' help prints these).
TRACE_SETS: dict[str, str] = {
    "test": "the scenario's synthetic test split (seeds never used in training)",
    "val": "its synthetic validation split",
    "own": "its own workload (its Arena trace; a synthetic-only scenario has none)",
    "all": "test + own",
}


def trace_set(
    scenario: Scenario,
    which: str,
    tuner: Tuner,
    *,
    data_dir: str | Path | None = None,
    max_traces: int | None = None,
) -> list[Trace]:
    """The traces of a named set, the first ``max_traces`` of them if given.

    Raises:
        ConfigError: an unknown set, or an empty one (``own`` on a synthetic-only scenario).
    """
    if which not in TRACE_SETS:
        raise ConfigError(f"--traces {which!r}: expected one of {', '.join(TRACE_SETS)}")
    out: list[Trace] = []
    if which in ("test", "val", "all"):
        out += scenario.held_out_traces("val" if which == "val" else "test", tuner)
    if which in ("own", "all") and scenario.workload.trace is not None:
        out.append(scenario.own_trace(data_dir, tuner))
    if not out:
        raise ConfigError(
            f"{scenario.name}: no traces in set {which!r} (it has no own trace; use test or val)"
        )
    return out[:max_traces] if max_traces else out


def trace_files(
    files: Sequence[str],
    tuner: Tuner,
    *,
    trace_format: str = "auto",
    trace_seed: int = 0,
    iteration_divisor: int | None = None,
    max_traces: int | None = None,
) -> list[Trace]:
    """Trace files read in ``trace_format``, warning on stderr about unusable rows skipped."""
    from crius_gym.scenarios.trace_files import read_trace
    from crius_gym.workload.mapping import JobMapping

    mapping = JobMapping(seed=trace_seed)
    given = [
        read_trace(
            f, trace_format, tuner=tuner, mapping=mapping, iteration_divisor=iteration_divisor
        )
        for f in files
    ]
    for t in given:
        for line in t.skipped_report():
            print(f"warning: {t.name}: skipped {line}", file=sys.stderr, flush=True)
    return given[:max_traces] if max_traces else given
