"""Entry-point wrapper for scripts: bad input ends with one clear line, not a traceback."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable

from crius_gym.atomic import fresh_run_dir
from crius_gym.errors import CriusGymError


def run_main(main: Callable[[], None]) -> None:
    """Run ``main``; report input errors on stderr as ``error: …`` and exit with status 2."""
    try:
        main()
    except (CriusGymError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


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
        type=int,
        default=0,
        metavar="N",
        help="seed of the mapping that gives a --trace's jobs models and iterations when the "
        "file names none (every format but arena) (default: 0)",
    )
