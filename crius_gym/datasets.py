"""Where the public datasets live.

The project never copies public data into the repository. Scripts take a data directory from
``--data-dir`` or from the environment variable ``CRIUS_GYM_DATA`` (CI sets it to
``../shared/data``); when neither is given, ``../shared/data`` next to the repository is tried.
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "CRIUS_GYM_DATA"

#: Files of the public data directory that the project knows, relative to the data directory.
ARENA_MEASUREMENTS = Path("arena/measured_iteration_times.csv")
ARENA_MODEL_CONFIGS = Path("arena/model_configs.csv")
MEGATRON_TABLE1 = Path("megatron_table1.csv")
ARENA_TRACES = {
    "philly": Path("arena/traces/simulate_trace_philly.csv"),
    "venus": Path("arena/traces/simulate_trace_venus.csv"),
    "pai": Path("arena/traces/simulate_trace_pai.csv"),
    "testbed": Path("arena/traces/runtime_trace.csv"),
}


def data_dir(explicit: str | Path | None = None) -> Path:
    """Return the public data directory.

    Args:
        explicit: a directory given on the command line; wins over the environment.

    Returns:
        The first of: ``explicit``, ``$CRIUS_GYM_DATA``, ``<repo>/../shared/data``. The path may not
        exist; callers that need a file check with :func:`data_file`.
    """
    if explicit is not None:
        return Path(explicit)
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env)
    return Path(__file__).resolve().parents[2] / "shared" / "data"


def data_file(relative: str | Path, explicit_dir: str | Path | None = None) -> Path:
    """Return the path of a public data file, raising a clear error when it is absent.

    Args:
        relative: path inside the data directory, e.g. :data:`ARENA_MEASUREMENTS`.
        explicit_dir: optional data directory overriding the environment.

    Raises:
        FileNotFoundError: naming the file and how to point the project at the data.
    """
    path = data_dir(explicit_dir) / relative
    if not path.is_file():
        raise FileNotFoundError(
            f"public data file {path} not found; set {ENV_VAR} (or --data-dir) to the directory "
            f"holding {relative}"
        )
    return path
