"""From what a cluster trace records to jobs the simulator can run: a seeded, documented mapping.

Public traces (Philly, Helios, PAI, a user's own CSV) record a job's arrival, its GPU count and
how long it ran, not the model it trained. :func:`map_records` fills in the rest:

1. **GPU count** and **arrival** are the trace's (arrivals rebased so the first job arrives at 0).
2. **GPU type**: the record's, when the cluster has that type; otherwise drawn from the cluster's
   types with the preset's ``gpu_type_weights`` (:func:`~crius_gym.workload.synthetic.
   cluster_type_weights`), as the synthetic traces draw it.
3. **Model and batch**: the record's when it names them (a missing batch is drawn from the
   preset's choices for the model's family); otherwise drawn from the preset's ``model_mix`` and
   ``batch_choices``, redrawn (up to ``max_draws`` times) until the model has a plan on the
   record's GPUs of that type. A record on which no drawn model fits is skipped with the reason.
4. **Iterations**: the record's, when given; otherwise ``round(duration_s / t)``, at least 1,
   where ``t`` is the seconds per iteration of the model on the record's GPUs of that type, as
   the caller's :class:`IterationTimer` prices it (the tuner's best plan, in
   :mod:`crius_gym.scenarios.trace_files`). A job thus keeps the trace's run time when it runs on
   what it asked for.

Randomness: one :class:`numpy.random.Generator` seeded with ``(seed, 97)`` draws a fixed block of
``1 + 2 * max_draws`` uniforms per record, in file order, so a record's job depends only on the
seed, its position and itself; redraws never shift other records' streams.

**How this differs from the Arena authors' traces** (``traces/regenerate_sim_trace.py``, branch
``ae-eurosys`` of sjtu-epcc/arena): they keep only arrival and duration from Helios and PAI and
draw the GPU count, type, model and batch at random (the count capped by the model's size), then
set iterations from the duration at the drawn Cell's best throughput, and replace iteration counts
outside [2,000, 10,000] (Helios) or [1,000, 5,000] (PAI) by uniform draws; their Philly trace
scales the ElasticFlow trace's iterations by batch. Here the trace's own GPU count and duration
are kept, nothing is clipped or redrawn, and the model is drawn conditioned on fitting that count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

import numpy as np

from crius_gym.errors import ConfigError
from crius_gym.workload.formats.records import RecordSet, TraceRecord, no_usable_rows
from crius_gym.workload.job import Job, Trace, TraceIssue
from crius_gym.workload.models import ModelCatalog, ModelSpec, load_model_catalog
from crius_gym.workload.synthetic import SyntheticConfig, cluster_type_weights, synthetic_preset

#: The preset whose model, batch and type mix each record format is given by default.
DEFAULT_PRESETS = {"csv": "philly", "philly": "philly", "helios": "helios", "pai": "pai"}
# Entropy (seed, 97): disjoint from the synthetic splits' (seed, 0..2, i) and the scenario's 98/99.
_STREAM = 97
_T = TypeVar("_T")


class IterationTimer(Protocol):
    """Seconds per iteration of a model on a GPU request, or None when it has no plan there."""

    def __call__(
        self, model: ModelSpec, global_batch: int, num_gpus: int, gpu_type: str
    ) -> float | None:
        """Price one iteration.

        Args:
            model: the model.
            global_batch: samples per iteration.
            num_gpus: GPUs of the request.
            gpu_type: canonical GPU type of the request (one of the cluster's).
        """
        ...


@dataclass(frozen=True)
class JobMapping:
    """How records become jobs (module docstring); validated on construction.

    Attributes:
        preset: workload preset whose ``model_mix``, ``batch_choices`` and ``gpu_type_weights``
            are drawn from (``philly``, ``helios``, ``pai``; None: the format's, see
            :data:`DEFAULT_PRESETS`).
        seed: seed of the draws.
        max_draws: model draws per record before it is skipped as fitting nowhere (>= 1).
    """

    preset: str | None = None
    seed: int = 0
    max_draws: int = 16

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ConfigError(f"JobMapping.seed must be an integer >= 0, got {self.seed!r}")
        if isinstance(self.max_draws, bool) or not isinstance(self.max_draws, int):
            raise ConfigError(f"JobMapping.max_draws must be an integer, got {self.max_draws!r}")
        if self.max_draws < 1:
            raise ConfigError(f"JobMapping.max_draws must be >= 1, got {self.max_draws}")


class _SkipError(Exception):
    """A record that cannot become a job (internal: becomes a TraceIssue)."""


def _pick(pairs: Sequence[tuple[_T, float]], u: float) -> _T:
    """The value whose weight interval holds ``u`` (inverse-CDF lookup of one uniform)."""
    weights = np.array([w for _, w in pairs], dtype=float)
    cdf = np.cumsum(weights) / weights.sum()
    return pairs[min(int(np.searchsorted(cdf, u, side="right")), len(pairs) - 1)][0]


class _Mapper:
    def __init__(
        self,
        preset: SyntheticConfig,
        timer: IterationTimer,
        gpu_types: Sequence[str],
        models: ModelCatalog,
        max_draws: int,
    ) -> None:
        self.preset = preset
        self.timer = timer
        self.types = cluster_type_weights(preset, gpu_types)
        self.models = models
        self.batches = dict(preset.batch_choices)
        self.max_draws = max_draws
        self._times: dict[tuple[str, int, int, str], float | None] = {}

    def time(self, model: ModelSpec, batch: int, gpus: int, kind: str) -> float | None:
        key = (model.name, batch, gpus, kind)
        if key not in self._times:  # many records share a request: price each once
            self._times[key] = self.timer(model, batch, gpus, kind)
        return self._times[key]

    def batch_for(self, model: ModelSpec, u: float) -> int:
        choices = self.batches.get(model.family)
        if not choices:
            raise _SkipError(
                f"batch_size: blank, and the preset has no batch choices for family "
                f"{model.family!r}"
            )
        return _pick(choices, u)

    def job(self, r: TraceRecord, u: np.ndarray, t0: float) -> Job:
        kind = r.gpu_type if r.gpu_type in self.types else None
        if kind is None:
            kind = _pick(list(self.types.items()), u[0])
        if r.model is not None:
            model = r.model
            batch = r.global_batch or self.batch_for(model, u[2])
            seconds = None
            if r.iterations is None:
                seconds = self.time(model, batch, r.num_gpus, kind)
            if r.iterations is None and seconds is None:
                raise _SkipError(f"model: {model.name} has no plan on {r.num_gpus} {kind} GPUs")
        else:
            for k in range(self.max_draws):
                name = _pick(self.preset.model_mix, u[1 + 2 * k])
                model = self.models.get(name)
                batch = self.batch_for(model, u[2 + 2 * k])
                seconds = self.time(model, batch, r.num_gpus, kind)
                if seconds is not None:
                    break
            else:
                raise _SkipError(
                    f"num_gpus: none of {self.max_draws} models drawn from the mix has a plan on "
                    f"{r.num_gpus} {kind} GPUs"
                )
        if r.iterations is not None:
            iterations = r.iterations
        else:
            assert r.duration_s is not None and seconds is not None  # the readers guarantee one
            iterations = max(1, round(r.duration_s / seconds))
        return Job(
            job_id=r.job_id,
            arrival_s=r.arrival_s - t0,
            model=model,
            global_batch=batch,
            iterations=iterations,
            requested_gpus=r.num_gpus,
            requested_gpu_type=kind,
            deadline_s=None if r.deadline_s is None else r.deadline_s - t0,
        )


def map_records(
    records: RecordSet,
    timer: IterationTimer,
    gpu_types: Sequence[str],
    mapping: JobMapping | None = None,
    models: ModelCatalog | None = None,
) -> Trace:
    """Turn a file's records into a trace of jobs (module docstring).

    Args:
        records: what a reader of :mod:`crius_gym.workload.formats` returned.
        timer: seconds per iteration of a model on a request (None: no plan there).
        gpu_types: the cluster's GPU types (types are drawn among these).
        mapping: preset, seed and redraw budget (default: :class:`JobMapping`'s).
        models: catalogue resolving the preset's model names (default: the packaged one).

    Returns:
        The jobs sorted by arrival (ties keep file order; the first arrives at 0), named like
        the record set; the reader's skipped rows and the records that could not be mapped are
        in ``Trace.skipped``, in file order, with their lines.

    Raises:
        InputFileError: no record could become a job (the first reasons are listed).
        ConfigError: the preset gives none of the cluster's GPU types a weight.
        UnknownNameError: an unknown preset.
    """
    mapping = mapping or JobMapping()
    models = models or load_model_catalog()
    preset_name = mapping.preset or DEFAULT_PRESETS.get(records.source_format, "philly")
    preset = synthetic_preset(preset_name)
    mapper = _Mapper(preset, timer, gpu_types, models, mapping.max_draws)
    rng = np.random.default_rng(np.random.SeedSequence((mapping.seed, _STREAM)))
    draws = rng.random((len(records.records), 1 + 2 * mapping.max_draws))
    first_s = min(r.arrival_s for r in records.records)  # times from here are >= 0
    jobs: list[Job] = []
    issues: list[TraceIssue] = list(records.skipped)
    for r, u in zip(records.records, draws, strict=True):
        try:
            jobs.append(mapper.job(r, u, first_s))
        except _SkipError as exc:
            issues.append(TraceIssue(r.line, str(exc)))
    if not jobs:
        raise no_usable_rows(records.path, issues)
    # Rebased on the earliest record that became a job, so the first job arrives at 0.
    t0 = min(j.arrival_s for j in jobs)
    jobs = [
        replace(
            j,
            arrival_s=j.arrival_s - t0,
            deadline_s=None if j.deadline_s is None else j.deadline_s - t0,
        )
        for j in jobs
    ]
    jobs.sort(key=lambda j: j.arrival_s)
    issues.sort(key=lambda i: i.line)
    return Trace(records.name, tuple(jobs), tuple(issues))
