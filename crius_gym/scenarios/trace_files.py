"""Read any trace file the project knows onto a cluster: format detection plus the job mapping.

The Arena CSVs are read as they stand (:mod:`crius_gym.workload.arena_trace`); the generic CSV and
the Philly, Helios and PAI formats (:mod:`crius_gym.workload.formats`) are given models and
iterations by :mod:`crius_gym.workload.mapping`, priced by the cluster's tuner: a record's
duration becomes iterations at the tuner's best plan for the model on the record's GPU count and
type (the layout with the fewest nodes that admits a plan).
"""

from __future__ import annotations

from pathlib import Path

from crius_gym.errors import InputFileError, UnknownNameError
from crius_gym.hardware.gpus import load_gpu_catalog
from crius_gym.perf.tuner import Tuner, layouts_for
from crius_gym.workload.arena_trace import read_arena_trace
from crius_gym.workload.formats import TRACE_FORMATS, detect_format, read_records
from crius_gym.workload.job import Trace
from crius_gym.workload.mapping import IterationTimer, JobMapping, map_records
from crius_gym.workload.models import ModelSpec, load_model_catalog


def tuner_timer(tuner: Tuner) -> IterationTimer:
    """Seconds per iteration at the tuner's best plan on a request (None: no layout admits one)."""
    cluster = tuner.cluster

    def seconds(model: ModelSpec, global_batch: int, num_gpus: int, gpu_type: str) -> float | None:
        for layout in layouts_for(cluster.group(gpu_type), num_gpus):
            est = tuner.best_in_layout(model, global_batch, gpu_type, layout)
            if est is not None:
                return float(est.iter_time_s)
        return None

    return seconds


def read_trace(
    path: str | Path,
    trace_format: str | None = None,
    *,
    tuner: Tuner,
    mapping: JobMapping | None = None,
    iteration_divisor: int | None = None,
    name: str | None = None,
) -> Trace:
    """Read a trace file in any known format, as jobs for ``tuner``'s cluster.

    Args:
        path: the file (for PAI, the job table; its task table is read from beside it).
        trace_format: one of :data:`~crius_gym.workload.formats.TRACE_FORMATS`, or None (or
            ``auto``) to detect it (:func:`~crius_gym.workload.formats.detect_format`).
        tuner: prices durations into iterations and supplies the cluster's GPU types.
        mapping: preset and seed of the model draws (ignored for ``arena``, whose rows name
            their models).
        iteration_divisor: ``arena`` only: floor-divide ``num_iteration`` by this (default: the
            artifact's convention, see :func:`~crius_gym.workload.arena_trace.read_arena_trace`).
        name: trace label (default: the reader's, the file stem).

    Returns:
        The trace; unusable rows are in ``Trace.skipped`` with their lines and reasons.

    Raises:
        UnknownNameError: an unknown ``trace_format``.
        InputFileError: the path is a folder, the format cannot be detected, or the file is
            malformed (file, line, field named).
        FileNotFoundError: the file does not exist.
    """
    path = Path(path)
    if path.is_dir():
        raise InputFileError(path, "is a folder; give a trace file (for PAI, its job table)")
    if trace_format in (None, "auto"):
        trace_format = detect_format(path)
    if trace_format not in TRACE_FORMATS:
        raise UnknownNameError("trace format", trace_format, ("auto", *TRACE_FORMATS))
    if trace_format == "arena":
        return read_arena_trace(path, name=name, iteration_divisor=iteration_divisor)
    models = load_model_catalog()
    records = read_records(path, trace_format, models, load_gpu_catalog(), name)
    return map_records(records, tuner_timer(tuner), tuner.cluster.gpu_types, mapping, models)
