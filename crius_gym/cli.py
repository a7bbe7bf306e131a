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
