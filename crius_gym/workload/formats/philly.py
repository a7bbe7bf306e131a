"""Reader of the Microsoft Philly trace's job log (``cluster_job_log``, msr-fiddle/philly-traces).

The file is one JSON list; each entry is a job::

    {"jobid": "application_1506638472019_10238", "status": "Pass", "vc": "...", "user": "...",
     "submitted_time": "2017-10-03 02:57:58",
     "attempts": [{"start_time": "2017-10-03 02:58:01", "end_time": "2017-10-03 03:04:09",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]}]}

A job becomes a record with ``arrival_s`` = ``submitted_time``, ``num_gpus`` = the most GPUs any
attempt held (summed over its machines), and ``duration_s`` = last attempt's ``end_time`` − first
attempt's ``start_time`` (the run time the trace's analysis, Jeon et al., ATC'19, uses). Jobs of
every ``status`` that ran are kept: a killed job used the cluster too. Skipped, with the key at
fault: no attempt (never started), a missing or unparsable time (``None`` marks a job still running
when the log ends), no GPU in any attempt, or a non-positive run time. Philly names no GPU type
(its 12 GB and 24 GB cards are anonymous), so records have none. Line numbers in issues are the
entry's 1-based position in the list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crius_gym.errors import InputFileError, utf8_text
from crius_gym.workload.formats.records import (
    RecordCollector,
    RecordSet,
    RowError,
    TraceRecord,
    timestamp_s,
)

#: Format name (``--trace-format philly``).
FORMAT = "philly"


def _time(value: Any, field: str) -> float:
    if value is None or value in ("", "None"):
        raise RowError(field, "no time recorded (the job had not ended when the log was cut)")
    if not isinstance(value, str):
        raise RowError(field, f"{value!r} is not a timestamp string")
    return timestamp_s(value, field)


def _record(position: int, entry: Any) -> TraceRecord:
    if not isinstance(entry, dict):
        raise RowError("entry", f"expected a JSON object, got {type(entry).__name__}")
    job_id = entry.get("jobid")
    if not isinstance(job_id, str) or not job_id:
        raise RowError("jobid", "missing or not a string")
    arrival = _time(entry.get("submitted_time"), "submitted_time")
    attempts = entry.get("attempts")
    if not isinstance(attempts, list) or not attempts:
        raise RowError("attempts", "no attempt: the job never started")
    num_gpus = 0
    for i, attempt in enumerate(attempts):
        if not isinstance(attempt, dict):
            raise RowError(f"attempts[{i}]", "expected a JSON object")
        detail = attempt.get("detail") or []
        if not isinstance(detail, list):
            raise RowError(f"attempts[{i}].detail", "expected a list of machines")
        held = 0
        for machine in detail:
            gpus = machine.get("gpus") if isinstance(machine, dict) else None
            if not isinstance(gpus, list):
                raise RowError(f"attempts[{i}].detail.gpus", "expected a list of GPU names")
            held += len(gpus)
        num_gpus = max(num_gpus, held)
    if num_gpus == 0:
        raise RowError("attempts.detail.gpus", "no GPU in any attempt (a CPU job)")
    start = _time(attempts[0].get("start_time"), "attempts[0].start_time")
    end = _time(attempts[-1].get("end_time"), f"attempts[{len(attempts) - 1}].end_time")
    if end <= start:
        raise RowError("attempts.end_time", f"run time {end - start:g} s is not positive")
    return TraceRecord(
        line=position, job_id=job_id, arrival_s=arrival, num_gpus=num_gpus, duration_s=end - start
    )


def read_philly_job_log(path: str | Path, name: str | None = None) -> RecordSet:
    """Read a Philly ``cluster_job_log`` (module docstring).

    Args:
        path: the JSON file.
        name: trace label (default: the file stem).

    Raises:
        InputFileError: the file is not JSON, not a list, or has no usable job.
        FileNotFoundError: the file does not exist.
    """
    path = Path(path)
    with utf8_text(path), path.open(encoding="utf-8-sig") as fh:
        try:
            entries = json.load(fh)
        except json.JSONDecodeError as exc:
            raise InputFileError(path, f"not JSON: {exc.msg}", row=exc.lineno) from None
    if not isinstance(entries, list):
        raise InputFileError(path, f"expected a JSON list of jobs, got {type(entries).__name__}")
    out = RecordCollector(path)
    for position, entry in enumerate(entries, start=1):
        out.add_parsed(position, _record, entry)
    return out.finish(name or path.stem, FORMAT)
