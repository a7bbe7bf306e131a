"""Entry-point wrapper for scripts: bad input ends with one clear line, not a traceback."""

from __future__ import annotations

import sys
from collections.abc import Callable

from crius_gym.errors import CriusGymError


def run_main(main: Callable[[], None]) -> None:
    """Run ``main``; report input errors on stderr as ``error: …`` and exit with status 2."""
    try:
        main()
    except (CriusGymError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
