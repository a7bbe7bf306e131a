"""Entry-point wrapper for scripts: bad input ends with one clear line, not a traceback."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crius_gym.atomic import fresh_run_dir
from crius_gym.errors import CriusGymError


def run_main(main: Callable[[], None]) -> None:
    """Run ``main``; report input errors on stderr as ``error: …`` and exit with status 2."""
    try:
        main()
    except CriusGymError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except FileNotFoundError as exc:  # options are checked at parse time; this is the rest
        print(f"error: no such file: {exc.filename or exc}", file=sys.stderr)
        raise SystemExit(2) from None


def existing_path(value: str) -> str:
    """``type=`` of an option naming a file or folder that must exist.

    argparse then names the option and the path (``argument --trace: no such file or folder:
    x.csv``) before any work starts, instead of a bare ``[Errno 2]`` hours later.
    """
    if not Path(value).exists():
        raise argparse.ArgumentTypeError(f"no such file or folder: {value}")
    return value


def key_values(items: Sequence[str], option: str) -> dict[str, Any]:
    """``KEY=VALUE`` items of a repeatable option as a dict, each VALUE read as YAML.

    Raises:
        SystemExit: an item without ``=`` or without a key, naming ``option`` and the item.
    """
    from crius_gym.yamlfile import load_yaml

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not key or not sep:
            raise SystemExit(f"{option} {item!r}: expected KEY=VALUE")
        out[key] = load_yaml(value, f"{option} {item!r}")
    return out


@dataclass(frozen=True)
class Number:
    """``type=`` of a numeric option, with the range its values must lie in.

    argparse then refuses a value outside it at parse time, naming the option and the range
    (``argument --seed: -1 is not an integer in [0, 4294967295]``). NaN is never accepted;
    infinities only with ``allow_inf``. Every numeric option of every script uses one of these
    (``tests/reliability/test_option_ranges.py`` walks the parsers and checks it).

    Attributes:
        kind: ``int`` or ``float``.
        low: the smallest value allowed (None: no bound).
        high: the largest value allowed (None: no bound).
        low_open: ``low`` itself is excluded (``> low``, e.g. durations).
        allow_inf: ``inf`` is a meaningful value (e.g. "never").
    """

    kind: type = int
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    allow_inf: bool = False

    @property
    def __name__(self) -> str:  # argparse names a type by it in some messages
        return self.kind.__name__

    def describe(self) -> str:
        """The allowed values in words, e.g. ``an integer >= 1``."""
        noun = "an integer" if self.kind is int else "a number"
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {_plain(self.low)}")
        if self.high is not None:
            parts.append(f"<= {_plain(self.high)}")
        return (
            noun
            + (" " + " and ".join(parts) if parts else "")
            + (" (inf allowed)" if self.allow_inf else "")
        )

    def __call__(self, text: str) -> int | float:
        """Parse ``text``; raises :class:`argparse.ArgumentTypeError` outside the range."""
        try:
            value: int | float = int(text) if self.kind is int else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {self.describe()}") from None
        if isinstance(value, float) and (
            math.isnan(value) or (math.isinf(value) and not self.allow_inf)
        ):
            raise argparse.ArgumentTypeError(f"{text!r} is not {self.describe()}")
        finite = not (isinstance(value, float) and math.isinf(value))
        below = self.low is not None and (value < self.low or (self.low_open and value == self.low))
        above = finite and self.high is not None and value > self.high
        if below or above:
            raise argparse.ArgumentTypeError(f"{text!r} is not {self.describe()}")
        return value


def _plain(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else f"{bound:g}"


COUNT = Number(int, 1)
"""A count that must be at least 1 (traces, jobs, rounds, repeats, timesteps)."""
NONNEG_INT = Number(int, 0)
"""A count where 0 means "none" (e.g. no audit, no stress traces)."""
SEED = Number(int, 0, 2**32 - 1)
"""A seed: what numpy, random and torch all accept."""
POSITIVE = Number(float, 0.0, low_open=True)
"""A duration, load or share that must be above 0."""
NONNEG = Number(float, 0.0)
"""A margin or tolerance that may be 0."""


def policy_names_help(what: str, default: str) -> str:
    """Help of an option taking scheduler names: the forms a name can take (crius_gym.plugins)."""
    from crius_gym.plugins import entry_point_names
    from crius_gym.policies.registry import available

    eps = entry_point_names()
    return (
        f"{what}: registered names ({', '.join(available())}), your own Policy as "
        "MODULE:CLASS or FILE.py:CLASS (docs/extending.md)"
        + (
            f", or an installed entry point ({', '.join(eps)})"
            if eps
            else ", or an installed package's entry point (group crius_gym.policies)"
        )
        + f"; every name is checked before the first run (default: {default})"
    )


def add_output_options(
    parser: argparse.ArgumentParser,
    script: str,
    force_help: str = "replace existing outputs in --out (never by default)",
) -> None:
    """``--out`` (default: a fresh ``results/tmp/<script>-<date>-<time>/``) and ``--force``.

    The scripts never overwrite committed files by default; with ``--force`` they replace
    existing outputs (checked with :func:`crius_gym.atomic.refuse_overwrite`).
    """
    parser.add_argument(
        "--out",
        metavar="DIR",
        default=str(fresh_run_dir(script)),
        help=f"output directory (default: a fresh results/tmp/{script}-<date>-<time>/; "
        "existing outputs are replaced only with --force)",
    )
    parser.add_argument("--force", action="store_true", help=force_help)


DATA_DIR_HELP = "public data directory (default: $CRIUS_GYM_DATA or ../shared/data)"


def add_data_dir_option(parser: argparse.ArgumentParser, help: str = DATA_DIR_HELP) -> None:
    """``--data-dir``: where the public data lives (resolved by :mod:`crius_gym.datasets`)."""
    parser.add_argument("--data-dir", metavar="DIR", help=help)


def add_trace_options(
    parser: argparse.ArgumentParser, trace_help: str, *, repeatable: bool = False
) -> None:
    """``--trace FILE`` with ``--trace-format`` (detected by default) and ``--trace-seed``.

    The formats are those of :func:`crius_gym.scenarios.trace_files.read_trace`: the Arena CSVs, the
    generic CSV, and the public Philly, Helios and PAI traces (docs/workload.md "Your own
    traces").
    """
    from crius_gym.workload.formats import TRACE_FORMATS  # light: no scenario or policy import

    parser.add_argument(
        "--trace",
        action="append" if repeatable else "store",
        default=[] if repeatable else None,
        type=existing_path,
        metavar="FILE",
        help=trace_help + (" (repeatable)" if repeatable else ""),
    )
    parser.add_argument(
        "--trace-format",
        choices=["auto", *TRACE_FORMATS],
        default="auto",
        help="format of --trace: 'auto' detects it from the file's name and header; 'csv' is "
        "the generic format (arrival_s, num_gpus, duration_s or iterations, optional gpu_type, "
        "model, batch_size); for 'pai' give the job table, its task table is read from beside "
        "it (default: auto)",
    )
    parser.add_argument(
        "--trace-seed",
        type=SEED,
        default=0,
        metavar="N",
        help="seed of the mapping that gives a --trace's jobs models and iterations when the "
        "file names none (every format but arena) (default: 0)",
    )


def add_trace_set_options(
    parser: argparse.ArgumentParser, default: str | None, default_help: str
) -> None:
    """``--traces`` (a named set of each scenario's traces), ``--max-traces`` and ``--strict``.

    The sets are :data:`crius_gym.eval.trace_sets.TRACE_SETS`, shared by every script that
    compares schedulers.
    """
    from crius_gym.eval.trace_sets import TRACE_SETS  # light: names only

    parser.add_argument(
        "--traces",
        choices=list(TRACE_SETS),
        default=default,
        help="held-out set: "
        + "; ".join(f"{k} = {v}" for k, v in TRACE_SETS.items())
        + f" (default: {default_help})",
    )
    parser.add_argument(
        "--max-traces", type=COUNT, metavar="N", help="use only the first N traces of a set"
    )
    parser.add_argument(
        "--strict",
        action="store_true",
        help="refuse a trace whose jobs request a GPU type the cluster lacks (by default they "
        "run on a type the scheduler picks, counted in a warning and in the report)",
    )
