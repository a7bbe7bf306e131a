"""What every trace format reads into: one :class:`TraceRecord` per usable row.

Public cluster traces describe jobs by what the cluster saw (arrival, GPUs, run time), not by the
model they trained. A reader keeps exactly that; :mod:`crius_gym.workload.mapping` then gives each
record a model, a batch and an iteration count. The row helpers here are shared by every reader,
so a malformed row is reported the same way in every format: its 1-based line (header = 1; for a
JSON list, the entry's 1-based position) and a reason that starts with the field's name.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from crius_gym.csvlines import records_with_lines
from crius_gym.errors import InputFileError, utf8_text
from crius_gym.wholenumbers import parse_whole
from crius_gym.workload.job import TraceIssue
from crius_gym.workload.models import ModelSpec

# Shown in the error of a file with no usable row; the full list is in Trace.skipped otherwise.
MAX_ISSUES_IN_ERROR = 5

#: Timestamp layout of the Philly and Helios traces (``2020-04-01 00:05:38``).
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S"


class RowError(Exception):
    """One unusable row: becomes a :class:`~crius_gym.workload.job.TraceIssue`.

    Args:
        field: the column or key at fault.
        message: what is wrong with its value.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True)
class TraceRecord:
    """A job as a trace file describes it, before it is given a model and iterations.

    Attributes:
        line: where it came from (1-based line, header = 1; for JSON, the entry's position).
        job_id: identifier, unique within the file.
        arrival_s: submission time, seconds, any origin (rebased when the trace is built).
        num_gpus: GPUs the job ran on or asked for, >= 1.
        duration_s: its run time, seconds (None: ``iterations`` is given instead).
        iterations: iterations to run (None: derived from ``duration_s``).
        gpu_type: canonical GPU type it asked for or ran on (None: none or not in the catalogue).
        model: the model it trains (None: drawn by the mapping).
        global_batch: samples per iteration (None: drawn with the model).
        deadline_s: deadline, same origin as ``arrival_s`` (None: none).
    """

    line: int
    job_id: str
    arrival_s: float
    num_gpus: int
    duration_s: float | None = None
    iterations: int | None = None
    gpu_type: str | None = None
    model: ModelSpec | None = None
    global_batch: int | None = None
    deadline_s: float | None = None


@dataclass(frozen=True)
class RecordSet:
    """The usable records of one file and the rows that were skipped.

    Attributes:
        path: the file read.
        name: label of the trace (the file stem unless given).
        records: usable records, in file order.
        skipped: rows that could not be used, with their reasons.
        source_format: the format they were read as (``csv``, ``philly``, ``helios``, ``pai``).
    """

    path: Path
    name: str
    records: tuple[TraceRecord, ...]
    skipped: tuple[TraceIssue, ...]
    source_format: str


def require(values: dict[str, str], columns: Iterable[str]) -> None:
    """:class:`RowError` naming the first of ``columns`` whose value is blank in this row."""
    for column in columns:
        if values[column] == "":
            raise RowError(column, "required value is blank")


def number(text: str, field: str) -> float:
    """A finite number, or :class:`RowError` naming ``field``."""
    try:
        value = float(text)
    except ValueError:
        raise RowError(field, f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise RowError(field, f"{text!r} is not a finite number")
    return value


def whole(text: str, field: str) -> int:
    """An integer read exactly, or :class:`RowError` naming ``field``.

    ``4`` and ``4.0`` are 4; see :func:`~crius_gym.wholenumbers.parse_whole`.
    """
    try:
        return parse_whole(text)
    except ValueError as exc:
        raise RowError(field, str(exc)) from None


def positive_int(text: str, field: str) -> int:
    """An integer >= 1 (``4`` or ``4.0``) read exactly, or :class:`RowError` naming ``field``."""
    value = whole(text, field)
    if value <= 0:
        raise RowError(field, f"{text!r} must be positive")
    return value


def timestamp_s(text: str, field: str) -> float:
    """Seconds since the epoch of a ``YYYY-MM-DD HH:MM:SS`` timestamp (naive, read as UTC)."""
    try:
        moment = datetime.strptime(text, TIMESTAMP_FORMAT)
    except ValueError:
        raise RowError(field, f"{text!r} is not a timestamp like '2020-04-01 00:05:38'") from None
    # Only differences matter (arrivals are rebased), so the time zone is irrelevant.
    return (moment - datetime(1970, 1, 1)).total_seconds()


def no_usable_rows(path: Path, issues: Iterable[TraceIssue]) -> InputFileError:
    """The error for a file none of whose rows can be used (listing the first reasons)."""
    issues = list(issues)
    if not issues:
        return InputFileError(path, "no job rows")
    shown = "; ".join(f"line {i.line}: {i.reason}" for i in issues[:MAX_ISSUES_IN_ERROR])
    more = len(issues) - MAX_ISSUES_IN_ERROR
    suffix = f"; … and {more} more" if more > 0 else ""
    return InputFileError(path, f"no usable rows ({len(issues)} skipped: {shown}{suffix})")


class RecordCollector:
    """Collects records and issues of one file, refusing duplicate job ids.

    Args:
        path: the file (named in errors).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.records: list[TraceRecord] = []
        self.issues: list[TraceIssue] = []
        self._first_line_of: dict[str, int] = {}

    def skip(self, line: int, reason: str) -> None:
        """Record an unusable row."""
        self.issues.append(TraceIssue(line, reason))

    def claim(self, line: int, job_id: str) -> bool:
        """Whether ``job_id`` is new; a repeated id is skipped as a duplicate."""
        first = self._first_line_of.setdefault(job_id, line)
        if first != line:
            self.skip(line, f"job_id: duplicate {job_id!r} (first on line {first})")
            return False
        return True

    def add(self, record: TraceRecord) -> None:
        """Keep a record, or skip it when its id was seen before."""
        if self.claim(record.line, record.job_id):
            self.records.append(record)

    def add_parsed(self, line: int, parse: Callable[..., TraceRecord], *args: Any) -> None:
        """Keep the record ``parse(line, *args)`` builds, or skip the row with its RowError."""
        try:
            record = parse(line, *args)
        except RowError as exc:
            self.skip(line, str(exc))
            return
        self.add(record)

    def finish(self, name: str, source_format: str) -> RecordSet:
        """The record set.

        Raises:
            InputFileError: no row was usable (the first reasons are listed).
        """
        if not self.records:
            raise no_usable_rows(self.path, self.issues)
        return RecordSet(self.path, name, tuple(self.records), tuple(self.issues), source_format)


def csv_rows(
    path: Path,
    required: tuple[str, ...],
    optional: tuple[str, ...],
    collector: RecordCollector,
    *,
    columns: tuple[str, ...] | None = None,
) -> Iterator[tuple[int, dict[str, str]]]:
    """``(line, {column: stripped value})`` for every non-blank row of a CSV file.

    Args:
        path: the file (UTF-8, a byte-order mark allowed).
        required: columns the header must have (their values may still be blank in a row).
        optional: further columns to return when present ("" when absent or blank).
        collector: receives rows with more fields than the header as issues.
        columns: the column names of a file without a header line (the first line is then data).

    Raises:
        InputFileError: the file is empty or its header lacks a required column (``field``).
    """
    # utf-8-sig: a byte-order mark would otherwise become part of the first column name.
    source = "expected"
    with utf8_text(path), path.open(newline="", encoding="utf-8-sig") as fh:
        reader = records_with_lines(fh)  # each row's first physical line, as an editor shows
        if columns is None:
            source = "header has"
            header = next(reader, (0, None))[1]
            if header is None or not any(h.strip() for h in header):
                raise InputFileError(path, "empty file: expected a header line")
            columns = tuple(h.strip() for h in header)
            for column in required:
                if column not in columns:
                    raise InputFileError(
                        path, f"missing column (header has: {', '.join(columns)})", field=column
                    )
        wanted = set(required) | set(optional)
        index = {c: i for i, c in enumerate(columns) if c in wanted}
        for line, record in reader:
            if len(record) > len(columns):
                collector.skip(line, f"row has {len(record)} fields, {source} {len(columns)}")
                continue
            values = {c: (record[i].strip() if i < len(record) else "") for c, i in index.items()}
            for c in optional:
                values.setdefault(c, "")
            yield line, values
