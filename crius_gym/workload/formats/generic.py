"""The generic CSV trace format: the least a user needs to describe their own jobs.

One job per line, header first; columns in any order, unknown columns ignored::

    job_id,arrival_s,num_gpus,gpu_type,duration_s,iterations,model,batch_size,deadline_s
    j1,0,8,a100,3600,,,,
    j2,120,4,,,20000,gpt-1.7b,256,

================  ========  ===================================================================
column            required  meaning
================  ========  ===================================================================
arrival_s         yes       submission time, seconds, any origin (rebased to the first job)
num_gpus          yes       GPUs the job asks for, integer >= 1
duration_s        one of    its run time on ``num_gpus`` GPUs, seconds > 0
iterations        one of    iterations to run, integer >= 1 (used when both are given)
job_id            no        unique text (default: ``row<line>``)
gpu_type          no        requested GPU type, catalogue name or alias (blank: any type)
model             no        catalogue name or Arena ``family__Size`` (blank: drawn, see below)
batch_size        no        global batch, samples per iteration (blank: drawn for the model)
deadline_s        no        deadline, same origin as ``arrival_s``
================  ========  ===================================================================

A blank ``model`` (and a blank ``batch_size``) are drawn, seeded, by
:mod:`crius_gym.workload.mapping`, which also turns ``duration_s`` into iterations. Every row that
cannot be used is skipped with its line and the field at fault (:class:`~crius_gym.workload.job.
TraceIssue`).
"""

from __future__ import annotations

from pathlib import Path

from crius_gym.errors import UnknownNameError
from crius_gym.hardware.gpus import GPUCatalog
from crius_gym.workload.formats.records import (
    RecordCollector,
    RecordSet,
    RowError,
    TraceRecord,
    csv_rows,
    number,
    positive_int,
    require,
)
from crius_gym.workload.models import ModelCatalog

#: Format name (``--trace-format csv``).
FORMAT = "csv"
REQUIRED_COLUMNS = ("arrival_s", "num_gpus")
OPTIONAL_COLUMNS = (
    "job_id",
    "duration_s",
    "iterations",
    "gpu_type",
    "model",
    "batch_size",
    "deadline_s",
)


def _record(line: int, v: dict[str, str], models: ModelCatalog, gpus: GPUCatalog) -> TraceRecord:
    require(v, REQUIRED_COLUMNS)
    arrival = number(v["arrival_s"], "arrival_s")
    if arrival < 0:
        raise RowError("arrival_s", f"{v['arrival_s']!r} must be >= 0")
    num_gpus = positive_int(v["num_gpus"], "num_gpus")
    iterations = positive_int(v["iterations"], "iterations") if v["iterations"] else None
    duration: float | None = None
    if iterations is None:
        if not v["duration_s"]:
            raise RowError("duration_s", "blank, and so is iterations: give one of them")
        duration = number(v["duration_s"], "duration_s")
        if duration <= 0:
            raise RowError("duration_s", f"{v['duration_s']!r} must be positive")
    gpu_type = None
    if v["gpu_type"]:
        try:
            gpu_type = gpus.canonical(v["gpu_type"])
        except UnknownNameError:
            raise RowError("gpu_type", f"unknown GPU type {v['gpu_type']!r}") from None
    model = None
    if v["model"]:
        try:
            model = models.get(v["model"])
        except UnknownNameError:
            raise RowError("model", f"unknown model {v['model']!r}") from None
    batch = None
    if v["batch_size"]:
        if model is None:
            raise RowError("batch_size", "given without a model")
        batch = positive_int(v["batch_size"], "batch_size")
    deadline = None
    if v["deadline_s"]:
        deadline = number(v["deadline_s"], "deadline_s")
        if deadline < arrival:
            raise RowError("deadline_s", f"{v['deadline_s']!r} is before arrival_s")
    return TraceRecord(
        line=line,
        job_id=v["job_id"] or f"row{line}",
        arrival_s=arrival,
        num_gpus=num_gpus,
        duration_s=duration,
        iterations=iterations,
        gpu_type=gpu_type,
        model=model,
        global_batch=batch,
        deadline_s=deadline,
    )


def read_generic_csv(
    path: str | Path, models: ModelCatalog, gpus: GPUCatalog, name: str | None = None
) -> RecordSet:
    """Read a trace in the generic CSV format (module docstring).

    Args:
        path: the CSV file.
        models: catalogue resolving ``model``.
        gpus: catalogue resolving ``gpu_type``.
        name: trace label (default: the file stem).

    Raises:
        InputFileError: the file is empty, lacks a required column, or has no usable row.
        FileNotFoundError: the file does not exist.
    """
    path = Path(path)
    out = RecordCollector(path)
    for line, values in csv_rows(path, REQUIRED_COLUMNS, OPTIONAL_COLUMNS, out):
        out.add_parsed(line, _record, values, models, gpus)
    return out.finish(name or path.stem, FORMAT)
