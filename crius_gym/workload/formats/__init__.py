"""Trace file formats: the generic CSV and the public Philly, Helios and PAI traces.

Each reader turns a file into a :class:`~crius_gym.workload.formats.records.RecordSet`: jobs as
the cluster saw them (arrival, GPUs, run time). :func:`crius_gym.workload.mapping.map_records`
then gives them models and iterations. The Arena CSVs name their models and iterations and are
read straight into jobs by :mod:`crius_gym.workload.arena_trace`.

================  ========================================================  ====================
format            file                                                      reader
================  ========================================================  ====================
``arena``         Arena ``simulate_trace_*.csv`` / ``runtime_trace.csv``    ``arena_trace``
``csv``           the generic CSV (:mod:`.generic`)                         ``read_generic_csv``
``philly``        Philly ``cluster_job_log`` (JSON)                         ``read_philly_job_log``
``helios``        Helios ``cluster_log.csv``                                ``read_helios_log``
``pai``           PAI 2020 ``pai_job_table.csv`` (+ ``pai_task_table.csv``)  ``read_pai_tables``
================  ========================================================  ====================
"""

from __future__ import annotations

import csv
from pathlib import Path

from crius_gym.errors import InputFileError, UnknownNameError, utf8_text
from crius_gym.hardware.gpus import GPUCatalog
from crius_gym.workload.formats import generic, helios, pai, philly
from crius_gym.workload.formats.records import RecordSet, TraceRecord
from crius_gym.workload.models import ModelCatalog

#: Every format a trace file may be in (``--trace-format``).
TRACE_FORMATS = ("arena", generic.FORMAT, philly.FORMAT, helios.FORMAT, pai.FORMAT)
#: The Arena header columns that identify its format.
_ARENA_MARKERS = {"submission_time", "num_iteration", "model_name"}

__all__ = ["TRACE_FORMATS", "RecordSet", "TraceRecord", "detect_format", "read_records"]


def detect_format(path: str | Path) -> str:
    """The format of a trace file, from its name and first line.

    ``*.json`` or a file whose text starts with ``[`` is Philly; ``pai_job_table*`` is PAI; a CSV
    header with ``submission_time, num_iteration, model_name`` is Arena, one with ``arrival_s,
    num_gpus`` the generic CSV, one with ``submit_time, gpu_num, duration`` Helios.

    Raises:
        InputFileError: none of these (the message lists the formats to pass explicitly).
        FileNotFoundError: the file does not exist.
    """
    path = Path(path)
    if path.name.startswith(pai.JOB_TABLE_PREFIX):
        return pai.FORMAT
    if path.suffix.lower() == ".json":
        return philly.FORMAT
    with utf8_text(path), path.open(newline="", encoding="utf-8-sig") as fh:
        head = fh.read(4096)
    if head.lstrip().startswith("["):
        return philly.FORMAT
    first = next(csv.reader(head.splitlines()[:1]), [])
    columns = {c.strip() for c in first}
    if columns >= _ARENA_MARKERS:
        return "arena"
    if set(generic.REQUIRED_COLUMNS) <= columns:
        return generic.FORMAT
    if {"submit_time", "gpu_num", "duration"} <= columns:
        return helios.FORMAT
    raise InputFileError(
        path,
        "cannot tell the trace format from its name and header "
        f"({', '.join(sorted(columns)) or 'empty'}); give it: one of {', '.join(TRACE_FORMATS)}",
    )


def read_records(
    path: str | Path,
    trace_format: str,
    models: ModelCatalog,
    gpus: GPUCatalog,
    name: str | None = None,
) -> RecordSet:
    """Read a trace file in one of the record formats (every format but ``arena``).

    Raises:
        UnknownNameError: ``trace_format`` is not a record format.
        InputFileError: the file is malformed (file, line and field named).
        FileNotFoundError: the file (or a PAI task table) does not exist.
    """
    if trace_format == generic.FORMAT:
        return generic.read_generic_csv(path, models, gpus, name)
    if trace_format == philly.FORMAT:
        return philly.read_philly_job_log(path, name)
    if trace_format == helios.FORMAT:
        return helios.read_helios_log(path, name)
    if trace_format == pai.FORMAT:
        return pai.read_pai_tables(path, name=name)
    raise UnknownNameError("record trace format", trace_format, TRACE_FORMATS[1:])
