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


def foreign_requests(trace: Trace, gpu_types: Sequence[str]) -> dict[str, int]:
    """Jobs per requested GPU type that the cluster lacks (the schedulers place them elsewhere).

    A trace recorded on another cluster (Philly's V100 jobs on the testbed's A40/A10) names
    types this cluster does not have; every scheduler then treats the request as absent and
    picks a type itself. Counted so that a report can say so, and ``--strict`` can refuse.
    """
    have = set(gpu_types)
    out: dict[str, int] = {}
    for job in trace.jobs:
        t = job.requested_gpu_type
        if t is not None and t not in have:
            out[t] = out.get(t, 0) + 1
    return dict(sorted(out.items()))


def check_requests(
    traces: Sequence[Trace], gpu_types: Sequence[str], *, strict: bool = False
) -> list[str]:
    """One line per trace with jobs moved off a GPU type the cluster lacks (warned on stderr).

    Raises:
        ConfigError: with ``strict``, naming the trace, the types and the counts.
    """
    lines = []
    for t in traces:
        moved = foreign_requests(t, gpu_types)
        if not moved:
            continue
        what = ", ".join(f"{n} × {k}" for k, n in moved.items())
        line = (
            f"`{t.name}`: {sum(moved.values())} of {len(t.jobs)} jobs request GPU types this "
            f"cluster lacks ({what}); every scheduler places them on a type of its choice"
        )
        if strict:
            raise ConfigError(f"--strict: {line.replace('`', '')}")
        print(f"warning: {line.replace('`', '')}", file=sys.stderr, flush=True)
        lines.append(line)
    return lines
