"""Reader of the SenseTime Helios job logs (``cluster_log.csv``, S-Lab-System-Group/HeliosData).

One job per line, header first (columns read by name; the release has ``job_id, user, vc,
gpu_num, cpu_num, node_num, state, submit_time, start_time, end_time, duration, queue``):

================  ==============================================================================
column            use
================  ==============================================================================
job_id            identifier (the release reuses ids across users: with ``user`` present the
                  record's id is ``job_id_user``, as the Arena authors built theirs)
gpu_num           ``num_gpus``; rows with 0 are CPU jobs and are skipped
submit_time       ``arrival_s``: ``YYYY-MM-DD HH:MM:SS`` or seconds
duration          ``duration_s``, seconds; rows with 0 (never ran) are skipped
state             kept whatever it is (``COMPLETED``, ``CANCELLED``, ``FAILED`` … all used GPUs)
================  ==============================================================================

The log names no GPU type, so records have none.
"""

from __future__ import annotations

import math
from pathlib import Path

from crius_gym.workload.formats.records import (
    RecordCollector,
    RecordSet,
    RowError,
    TraceRecord,
    csv_rows,
    number,
    require,
    timestamp_s,
    whole,
)

#: Format name (``--trace-format helios``).
FORMAT = "helios"
REQUIRED_COLUMNS = ("job_id", "gpu_num", "submit_time", "duration")
OPTIONAL_COLUMNS = ("user",)


def _seconds(text: str, field: str) -> float:
    """Seconds from a timestamp or a plain (finite) number of seconds."""
    try:
        value = float(text)
    except ValueError:
        return timestamp_s(text, field)
    if not math.isfinite(value):
        raise RowError(field, f"{text!r} is not a finite number")
    return value


def _record(line: int, v: dict[str, str]) -> TraceRecord:
    require(v, REQUIRED_COLUMNS)
    gpus = number(v["gpu_num"], "gpu_num")
    if gpus < 0 or not gpus.is_integer():
        raise RowError("gpu_num", f"{v['gpu_num']!r} must be an integer >= 0")
    gpus = whole(v["gpu_num"], "gpu_num")  # exactly (a float has 53 bits)
    if gpus == 0:
        raise RowError("gpu_num", "0 (a CPU job)")
    duration = number(v["duration"], "duration")
    if duration <= 0:
        raise RowError("duration", f"{v['duration']!r}: the job never ran")
    job_id = f"{v['job_id']}_{v['user']}" if v["user"] else v["job_id"]
    return TraceRecord(
        line=line,
        job_id=job_id,
        arrival_s=_seconds(v["submit_time"], "submit_time"),
        num_gpus=int(gpus),
        duration_s=duration,
    )


def read_helios_log(path: str | Path, name: str | None = None) -> RecordSet:
    """Read a Helios ``cluster_log.csv`` (module docstring).

    Args:
        path: the CSV file.
        name: trace label (default: the file's folder, the cluster's name, e.g. ``Venus``, when
            the file is named ``cluster_log.csv``; else its stem).

    Raises:
        InputFileError: the file is empty, lacks a required column, or has no usable row.
        FileNotFoundError: the file does not exist.
    """
    path = Path(path)
    out = RecordCollector(path)
    for line, values in csv_rows(path, REQUIRED_COLUMNS, OPTIONAL_COLUMNS, out):
        out.add_parsed(line, _record, values)
    default = path.parent.name if path.name == "cluster_log.csv" and path.parent.name else path.stem
    return out.finish(name or default, FORMAT)
