"""Reader of the Crius/Arena job traces (``simulate_trace_*.csv``, ``runtime_trace.csv``).

Format (one job per line, header first)::

    job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type

================  =========================================================================
column            meaning
================  =========================================================================
job_id            unique identifier (text)
submission_time   seconds, any origin (the reader rebases to the first job)
num_iteration     iterations to run, integer >= 1
model_name        ``family__Size`` (e.g. ``bert__760M``) or a catalogue name
deadline          seconds, same origin as ``submission_time``; blank = no deadline
batch_size        global batch, samples per iteration, integer >= 1
num_gpu           requested GPU count, integer >= 1
gpu_type          requested GPU type, catalogue name or alias (``a100``, ``a40`` …)
================  =========================================================================

Rows that cannot be used are skipped and reported as :class:`TraceIssue`; problems with the file as
a whole raise :class:`~crius_gym.errors.InputFileError`.

**Work per job.** The artifact's simulation traces (``simulate_trace_*.csv``) store five times the
iterations its simulator runs: the generator multiplies Philly's iterations by
``ITER_NUM_SCALE_FACTOR_SIM`` (``traces/regenerate_sim_trace.py``) and the simulator floor-divides
every trace's ``num_iteration`` by it at submission (``simulator.py::Simulator._submit_jobs``;
``macro/macro_def.py``: 5). The testbed trace (``runtime_trace.csv``) is consumed as it stands by
the artifact's runtime (``runtime/crius_runtime.py``, ``remained_iter_num_table[job_id] =
event.iter_num``; its generator already divided by ``ITER_NUM_SCALE_FACTOR = 100``). The reader
follows the same convention by default (:func:`arena_iteration_divisor`): ``num_iteration // 5``
(at least 1) for files named ``simulate_trace_*``, as is for every other file; the
``iteration_divisor`` argument overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from crius_gym import datasets
from crius_gym.errors import ConfigError, InputFileError, UnknownNameError
from crius_gym.hardware.gpus import GPUCatalog, load_gpu_catalog
from crius_gym.workload.formats.records import (
    RecordCollector,
    RowError,
    csv_rows,
    no_usable_rows,
    number,
    positive_int,
    require,
)
from crius_gym.workload.job import Job, Trace
from crius_gym.workload.models import ModelCatalog, ModelSpec, load_model_catalog

#: Columns every Arena trace must have, in the artifact's order.
REQUIRED_COLUMNS = (
    "job_id",
    "submission_time",
    "num_iteration",
    "model_name",
    "batch_size",
    "num_gpu",
    "gpu_type",
)
#: Columns that may be absent (or blank in a row).
OPTIONAL_COLUMNS = ("deadline",)

#: The artifact simulator's iteration divisor (``macro/macro_def.py::ITER_NUM_SCALE_FACTOR_SIM``).
ARENA_SIM_ITERATION_DIVISOR = 5
#: File-name prefix of the artifact's simulation traces (read with the divisor above).
ARENA_SIM_TRACE_PREFIX = "simulate_trace_"


def arena_iteration_divisor(path: str | Path) -> int:
    """The divisor the Arena artifact applies to a trace file's ``num_iteration``.

    5 for its simulation traces (files named ``simulate_trace_*``), 1 for anything else (the
    testbed's ``runtime_trace.csv`` and user files are used as they stand).
    """
    return ARENA_SIM_ITERATION_DIVISOR if Path(path).name.startswith(ARENA_SIM_TRACE_PREFIX) else 1


@dataclass(frozen=True)
class _Row:
    """A validated row before rebasing."""

    line: int
    job_id: str
    submission_s: float
    iterations: int
    model: ModelSpec
    deadline_s: float | None
    global_batch: int
    num_gpus: int
    gpu_type: str


def _parse_row(line: int, values: dict[str, str], models: ModelCatalog, gpus: GPUCatalog) -> _Row:
    require(values, REQUIRED_COLUMNS)
    submission = number(values["submission_time"], "submission_time")
    if submission < 0:
        raise RowError("submission_time", f"{values['submission_time']!r} must be >= 0")
    iterations = positive_int(values["num_iteration"], "num_iteration")
    try:
        model = models.get(values["model_name"])
    except UnknownNameError:
        raise RowError("model_name", f"unknown model {values['model_name']!r}") from None
    deadline: float | None = None
    if values.get("deadline", ""):
        deadline = number(values["deadline"], "deadline")
        if deadline < submission:
            raise RowError("deadline", f"{values['deadline']!r} is before submission_time")
    batch = positive_int(values["batch_size"], "batch_size")
    num_gpus = positive_int(values["num_gpu"], "num_gpu")
    try:
        gpu_type = gpus.canonical(values["gpu_type"])
    except UnknownNameError:
        raise RowError("gpu_type", f"unknown GPU type {values['gpu_type']!r}") from None
    return _Row(
        line=line,
        job_id=values["job_id"],
        submission_s=submission,
        iterations=iterations,
        model=model,
        deadline_s=deadline,
        global_batch=batch,
        num_gpus=num_gpus,
        gpu_type=gpu_type,
    )


def read_arena_trace(
    path: str | Path,
    models: ModelCatalog | None = None,
    gpus: GPUCatalog | None = None,
    *,
    name: str | None = None,
    iteration_divisor: int | None = None,
) -> Trace:
    """Read an Arena job trace.

    Each job's iterations are ``num_iteration // iteration_divisor``, at least 1 (see the module
    docstring: the artifact's simulator reads its simulation traces with a divisor of 5).

    Arrival times are rebased so that the earliest usable job arrives at 0 s; deadlines are shifted
    by the same amount. Jobs are sorted by arrival; ties keep file order. A row that cannot be used
    (blank required value, non-numeric or non-positive number, unknown model or GPU type, duplicate
    ``job_id``, deadline before submission) is skipped and recorded in ``Trace.skipped`` with its
    1-based file line (header = 1) and a reason starting with the column name.

    Args:
        path: the CSV file.
        models: catalogue that resolves ``model_name`` (default: the packaged one).
        gpus: catalogue that resolves ``gpu_type`` to canonical names (default: the packaged one).
        name: trace label (default: the file stem).
        iteration_divisor: floor-divide ``num_iteration`` by this (an integer >= 1; default:
            :func:`arena_iteration_divisor` of the file, 5 for ``simulate_trace_*`` files, else 1).

    Returns:
        The trace, with the skipped rows in ``Trace.skipped`` and the divisor used in
        ``Trace.iteration_divisor``.

    Raises:
        InputFileError: the file is empty, lacks a required column (named in ``field``) or has no
            usable row.
        FileNotFoundError: the file does not exist.
        ConfigError: ``iteration_divisor`` is not an integer >= 1.
    """
    models = models or load_model_catalog()
    gpus = gpus or load_gpu_catalog()
    path = Path(path)
    divisor = arena_iteration_divisor(path) if iteration_divisor is None else iteration_divisor
    if isinstance(divisor, bool) or not isinstance(divisor, int) or divisor < 1:
        raise ConfigError(f"iteration_divisor must be an integer >= 1, got {divisor!r}")
    rows: list[_Row] = []
    out = RecordCollector(path)  # the issues and the duplicate check; rows stay _Row here
    for line, values in csv_rows(path, REQUIRED_COLUMNS, OPTIONAL_COLUMNS, out):
        try:
            row = _parse_row(line, values, models, gpus)
        except RowError as exc:
            out.skip(line, str(exc))
            continue
        if out.claim(line, row.job_id):
            rows.append(row)
    issues = out.issues
    if not rows:
        raise no_usable_rows(path, issues)
    # Traces are not always sorted (the PAI one is not): rebase on the minimum, then a stable sort.
    t0 = min(r.submission_s for r in rows)
    rows.sort(key=lambda r: r.submission_s)
    jobs: list[Job] = []
    for r in rows:
        try:
            jobs.append(
                Job(
                    job_id=r.job_id,
                    arrival_s=r.submission_s - t0,
                    model=r.model,
                    global_batch=r.global_batch,
                    iterations=max(1, r.iterations // divisor),
                    requested_gpus=r.num_gpus,
                    requested_gpu_type=r.gpu_type,
                    deadline_s=None if r.deadline_s is None else r.deadline_s - t0,
                )
            )
        except ConfigError as exc:  # pragma: no cover - _parse_row checks what Job checks
            raise InputFileError(path, str(exc), row=r.line) from exc
    return Trace(name or path.stem, tuple(jobs), tuple(issues), iteration_divisor=divisor)


def load_arena_trace(
    which: str, data_dir: str | Path | None = None, *, iteration_divisor: int | None = None
) -> Trace:
    """Load one of the public Arena traces from the data directory.

    Args:
        which: ``philly`` (1,938 jobs), ``venus`` (438), ``pai`` (125) or ``testbed`` (244); the
            keys of :data:`crius_gym.datasets.ARENA_TRACES`.
        data_dir: public data directory (default: ``$CRIUS_GYM_DATA`` or ``../shared/data``).
        iteration_divisor: override of the artifact's divisor (5 for the three simulation
            traces, 1 for ``testbed``; see :func:`read_arena_trace`).

    Returns:
        The trace, named ``which``.

    Raises:
        UnknownNameError: ``which`` is not a known trace.
        FileNotFoundError: the file is absent from the data directory.
        InputFileError: the file is malformed.
    """
    try:
        relative = datasets.ARENA_TRACES[which]
    except KeyError:
        raise UnknownNameError("Arena trace", which, datasets.ARENA_TRACES) from None
    return read_arena_trace(
        datasets.data_file(relative, data_dir), name=which, iteration_divisor=iteration_divisor
    )
