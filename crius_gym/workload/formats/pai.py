"""Reader of the Alibaba PAI 2020 GPU trace (``pai_job_table`` + ``pai_task_table``).

From alibaba/clusterdata ``cluster-trace-gpu-v2020``. The release's CSVs have no header line
(the column names ship in separate ``.header`` files); a first line that starts with
``job_name`` is taken as a header and skipped. Columns, in order:

- ``pai_job_table``: ``job_name, inst_id, user, status, start_time, end_time``
- ``pai_task_table``: ``job_name, task_name, inst_num, status, start_time, end_time, plan_cpu,
  plan_mem, plan_gpu, gpu_type``

Times are seconds from the trace's origin. A job becomes a record with ``arrival_s`` = its
``start_time`` (its submission), ``duration_s`` = ``end_time − start_time``, and ``num_gpus`` =
Σ over its tasks of ``inst_num × ⌈plan_gpu / 100⌉`` (``plan_gpu`` is a percentage of one GPU; a
shared fraction counts as a whole GPU here). Its GPU type is that of its task with the most GPUs,
mapped to the catalogue by :data:`PAI_GPU_TYPES` (``MISC`` and ``P100`` have no catalogue entry:
no type). Jobs of every status that ended are kept. Skipped, with the field at fault: a blank or
non-positive run time (still running when the trace was cut), no task in the task table, no GPU
task (a CPU job), or a malformed task row (named with its task-table line).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

from crius_gym.errors import InputFileError
from crius_gym.workload.formats.records import (
    RecordCollector,
    RecordSet,
    RowError,
    TraceRecord,
    csv_rows,
    number,
    whole,
)

#: Format name (``--trace-format pai``).
FORMAT = "pai"
JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
#: PAI's GPU type names → catalogue names (None: not in the catalogue, so no type request).
PAI_GPU_TYPES: dict[str, str | None] = {
    "V100": "v100-16gb",
    "V100M32": "v100-32gb",
    "T4": "t4",
    "P100": None,
    "MISC": None,
}
#: File-name prefix that identifies a PAI job table (``--trace-format`` detection).
JOB_TABLE_PREFIX = "pai_job_table"


def task_table_for(job_table: Path) -> Path:
    """The task table beside a job table: ``pai_job_table*.csv`` → ``pai_task_table*.csv``.

    A job table named otherwise is paired with ``pai_task_table.csv`` in its folder.
    """
    if JOB_TABLE_PREFIX in job_table.name:
        return job_table.with_name(job_table.name.replace(JOB_TABLE_PREFIX, "pai_task_table", 1))
    return job_table.with_name("pai_task_table.csv")


def _rows(
    path: Path, columns: tuple[str, ...], out: RecordCollector
) -> Iterator[tuple[int, dict[str, str]]]:
    for line, values in csv_rows(path, (), columns, out, columns=columns):
        if line == 1 and values["job_name"] == "job_name":
            continue  # a header line
        yield line, values


def _task_gpus(path: Path) -> dict[str, tuple[int, str | None] | str]:
    """Per job: (GPUs, type) summed over its tasks, or the reason its tasks cannot be used."""
    scratch = RecordCollector(path)
    totals: dict[str, int] = {}
    kinds: dict[str, str | None] = {}
    widest: dict[str, int] = {}
    bad: dict[str, str] = {}
    for line, v in _rows(path, TASK_COLUMNS, scratch):
        job = v["job_name"]
        if not job or job in bad:
            continue  # a task of no job, or of a job already unusable
        try:
            inst = number(v["inst_num"], "inst_num") if v["inst_num"] else 1.0
            if inst < 1 or not inst.is_integer():
                raise RowError("inst_num", f"{v['inst_num']!r} must be an integer >= 1")
            inst = float(whole(v["inst_num"], "inst_num")) if v["inst_num"] else 1.0
            plan = number(v["plan_gpu"], "plan_gpu") if v["plan_gpu"] else 0.0
            if plan < 0:
                raise RowError("plan_gpu", f"{v['plan_gpu']!r} must be >= 0")
        except RowError as exc:
            bad[job] = f"{path.name} line {line}: {exc}"
            continue
        gpus = int(inst) * math.ceil(plan / 100.0)
        totals[job] = totals.get(job, 0) + gpus
        if gpus > widest.get(job, 0):
            widest[job] = gpus
            kinds[job] = PAI_GPU_TYPES.get(v["gpu_type"])
    for issue in scratch.issues:
        raise InputFileError(path, issue.reason, row=issue.line)
    out: dict[str, tuple[int, str | None] | str] = {
        job: (total, kinds.get(job)) for job, total in totals.items()
    }
    out.update(bad)
    return out


def _job_record(
    line: int, v: dict[str, str], tasks: dict[str, tuple[int, str | None] | str], tasks_name: str
) -> TraceRecord:
    job = v["job_name"]
    if not job:
        raise RowError("job_name", "blank")
    for field in ("start_time", "end_time"):
        if not v[field]:
            raise RowError(field, "blank (the job had not ended when the trace was cut)")
    start = number(v["start_time"], "start_time")
    end = number(v["end_time"], "end_time")
    if end <= start:
        raise RowError("end_time", f"run time {end - start:g} s is not positive")
    found = tasks.get(job)
    if found is None:
        raise RowError("job_name", f"{job!r} has no task in {tasks_name}")
    if isinstance(found, str):
        raise RowError("task", found)
    gpus, kind = found
    if gpus == 0:
        raise RowError("plan_gpu", "no GPU in any task (a CPU job)")
    return TraceRecord(
        line=line, job_id=job, arrival_s=start, num_gpus=gpus, duration_s=end - start, gpu_type=kind
    )


def read_pai_tables(
    job_table: str | Path, task_table: str | Path | None = None, name: str | None = None
) -> RecordSet:
    """Read the PAI 2020 job and task tables (module docstring).

    Args:
        job_table: ``pai_job_table.csv``.
        task_table: ``pai_task_table.csv`` (default: :func:`task_table_for` the job table).
        name: trace label (default: the job table's stem).

    Raises:
        InputFileError: a table is empty or has rows with more fields than the format, or no job
            is usable.
        FileNotFoundError: a table does not exist (the task table is needed for GPU counts).
    """
    job_table = Path(job_table)
    tasks_path = Path(task_table) if task_table is not None else task_table_for(job_table)
    if not tasks_path.is_file():
        raise FileNotFoundError(
            f"{tasks_path}: the PAI task table (GPU counts) is needed beside {job_table.name}"
        )
    tasks = _task_gpus(tasks_path)
    out = RecordCollector(job_table)
    for line, v in _rows(job_table, JOB_COLUMNS, out):
        out.add_parsed(line, _job_record, v, tasks, tasks_path.name)
    return out.finish(name or job_table.stem, FORMAT)
