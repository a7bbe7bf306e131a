"""Synthetic workloads: a seeded job generator modelled on the Arena Philly trace, and splits.

Every random draw comes from the :class:`numpy.random.Generator` the caller passes; nothing reads
global random state. The defaults of :class:`SyntheticConfig` were fitted on
``arena/traces/simulate_trace_philly.csv`` by ``python experiments/fit_workload.py`` (see
``docs/workload.md``).

Draw order is fixed and independent of the configuration's switches: for ``n`` jobs the generator
draws ``n`` uniforms for the model, ``n`` for the batch, ``n`` for the GPU count, ``n`` for the GPU
type, ``n`` normals for the iterations, then ``n - 1`` inter-arrival gaps. Categorical values come
from inverse-CDF lookups of those uniforms, so turning ``request_types`` off, or changing the
cluster's GPU types, leaves every other attribute of every job unchanged (common random numbers
across scenario variants).
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from importlib import resources
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from crius_gym.errors import ConfigError, UnknownNameError
from crius_gym.hardware.gpus import load_gpu_catalog
from crius_gym.workload.job import Job, Trace
from crius_gym.workload.models import ModelCatalog, load_model_catalog
from crius_gym.yamlfile import load_yaml

Arrival = Literal["poisson", "replay"]
WeightedStr = tuple[tuple[str, float], ...]
WeightedInt = tuple[tuple[int, float], ...]

#: Split names and the ids that enter their seed entropy (never reorder: ids fix the streams).
SPLITS: dict[str, int] = {"train": 0, "val": 1, "test": 2}
# SeedSequence turns each entropy int into 32-bit words and zero-pads to its pool size, so a seed
# or index of 2**32 or more could alias another (seed, split, index) triple; bounding keeps the
# streams disjoint by construction.
_ENTROPY_LIMIT = 2**32

# --- Defaults fitted on the Arena Philly trace (1,938 jobs) -------------------------------------
# Produced by `python experiments/fit_workload.py` (data: arena/traces/simulate_trace_philly.csv,
# read as the artifact's simulator reads it: num_iteration // 5; see workload/arena_trace.py).
# Weights are the trace's counts; the generator normalises them.
PHILLY_NUM_JOBS = 1938
# Exact mean gap: (last - first submission) / (jobs - 1) = (3,660,282 - 1,945,645) s / 1,937.
PHILLY_MEAN_INTERARRIVAL_S = (3_660_282 - 1_945_645) / 1937
PHILLY_MODEL_MIX: WeightedStr = (
    ("moe-2.4b", 454.0),
    ("moe-1.3b", 331.0),
    ("moe-690m", 237.0),
    ("moe-10b", 207.0),
    ("bert-1.3b", 154.0),
    ("bert-2.6b", 138.0),
    ("bert-760m", 120.0),
    ("wide_resnet-2b", 99.0),
    ("wide_resnet-1b", 55.0),
    ("wide_resnet-4b", 46.0),
    ("wide_resnet-500m", 39.0),
    ("bert-6.7b", 38.0),
    ("wide_resnet-6.8b", 18.0),
    ("moe-27b", 2.0),
)
PHILLY_BATCH_CHOICES: tuple[tuple[str, WeightedInt], ...] = (
    ("bert", ((128, 351.0), (256, 60.0), (512, 39.0))),
    ("moe", ((256, 972.0), (512, 192.0), (1024, 67.0))),
    ("wide_resnet", ((256, 232.0), (512, 20.0), (1024, 5.0))),
)
PHILLY_GPU_REQUEST: WeightedInt = (
    (1, 100.0),
    (2, 286.0),
    (4, 717.0),
    (8, 644.0),
    (16, 191.0),
)
PHILLY_GPU_TYPE_WEIGHTS: WeightedStr = (
    ("a40", 784.0),
    ("a10", 473.0),
    ("a100-40gb", 352.0),
    ("v100-32gb", 329.0),
)
# Log-normal maximum-likelihood fit of the iterations (num_iteration // 5): mean and std (ddof=0)
# of their logarithm. (Fitted on num_iteration as stored, before the division: mu = 10.774906,
# sigma = 1.453320, range [595, 15,268,646] -- five times the work the artifact simulates.)
PHILLY_ITERATIONS_LOG_MU = 9.165388
PHILLY_ITERATIONS_LOG_SIGMA = 1.453442
PHILLY_ITERATIONS_MIN = 119
PHILLY_ITERATIONS_MAX = 3_053_729


def _err(field: str, message: str) -> ConfigError:
    return ConfigError(f"SyntheticConfig.{field}: {message}")


def _as_pairs(field: str, value: Any) -> tuple[tuple[Any, Any], ...]:
    """Accept a mapping or a sequence of pairs (YAML gives either) and return a tuple of pairs."""
    items = value.items() if isinstance(value, Mapping) else value
    try:
        pairs = tuple(tuple(p) for p in items)
    except TypeError:
        raise _err(field, f"{value!r} is not a mapping or a sequence of pairs") from None
    for pair in pairs:
        if len(pair) != 2:
            raise _err(field, f"entry {pair!r} is not a (value, weight) pair")
    return pairs


def _check_weights(field: str, pairs: tuple[tuple[Any, Any], ...], *, allow_empty: bool) -> None:
    if not pairs and not allow_empty:
        raise _err(field, "must not be empty")
    keys = []
    total = 0.0
    for key, weight in pairs:
        keys.append(key)
        if not _is_real(weight):
            raise _err(field, f"weight of {key!r} is not a number")
        if not math.isfinite(weight) or weight < 0:
            raise _err(field, f"weight of {key!r} must be finite and >= 0")
        total += weight
    if len(set(keys)) != len(keys):
        raise _err(field, "values must be unique")
    if pairs and total <= 0:
        raise _err(field, "weights must not all be 0")


def _check_positive_ints(field: str, pairs: tuple[tuple[Any, Any], ...]) -> None:
    for key, _ in pairs:
        if not _is_int(key) or key < 1:
            raise _err(field, f"{key!r} is not a positive integer")


def _is_real(value: object) -> bool:
    # numbers.Real admits numpy scalars; bool is an int subclass but never a sensible weight.
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class SyntheticConfig:
    """What a synthetic workload looks like; validated on construction.

    Distribution fields are tuples of ``(value, weight)`` pairs; weights need not sum to 1 (the
    defaults are the Philly trace's counts). Mappings and lists are accepted too and stored as
    tuples, so a configuration read from YAML stays immutable and hashable.

    Attributes:
        num_jobs: jobs per generated trace.
        mean_interarrival_s: mean gap between consecutive arrivals, seconds.
        arrival: ``poisson`` (exponential gaps) or ``replay`` (gaps resampled with replacement
            from ``replay_gaps_s``, rescaled so that their mean is ``mean_interarrival_s``).
        replay_gaps_s: inter-arrival gaps to resample, seconds (required by ``replay``; see
            :func:`interarrival_gaps`).
        model_mix: ``(model name, weight)``; names in catalogue or Arena ``family__Size`` form.
        batch_choices: ``(model family, ((global batch, weight), ...))``; every family of
            ``model_mix`` needs an entry.
        gpu_request: ``(requested GPU count, weight)``; counts are powers of two (1-16 in the
            Arena traces).
        gpu_type_weights: ``(GPU type, weight)``. At generation only the cluster's types are used,
            renormalised; a cluster type absent here gets weight 0, unless this is empty, when the
            cluster's types are uniform.
        iterations_log_mu: mean of ln(iterations) of the log-normal.
        iterations_log_sigma: standard deviation of ln(iterations).
        iterations_min: lower clip of iterations (>= 1).
        iterations_max: upper clip of iterations.
        request_gpus: give jobs a requested GPU count (False: ``requested_gpus`` is None).
        request_types: give jobs a requested GPU type (False: ``requested_gpu_type`` is None).
    """

    num_jobs: int = PHILLY_NUM_JOBS
    mean_interarrival_s: float = PHILLY_MEAN_INTERARRIVAL_S
    arrival: Arrival = "poisson"
    replay_gaps_s: tuple[float, ...] = ()
    model_mix: WeightedStr = PHILLY_MODEL_MIX
    batch_choices: tuple[tuple[str, WeightedInt], ...] = PHILLY_BATCH_CHOICES
    gpu_request: WeightedInt = PHILLY_GPU_REQUEST
    gpu_type_weights: WeightedStr = PHILLY_GPU_TYPE_WEIGHTS
    iterations_log_mu: float = PHILLY_ITERATIONS_LOG_MU
    iterations_log_sigma: float = PHILLY_ITERATIONS_LOG_SIGMA
    iterations_min: int = PHILLY_ITERATIONS_MIN
    iterations_max: int = PHILLY_ITERATIONS_MAX
    request_gpus: bool = True
    request_types: bool = True

    def __post_init__(self) -> None:
        set_ = object.__setattr__  # frozen: normalise containers in place once
        try:
            set_(self, "replay_gaps_s", tuple(float(g) for g in self.replay_gaps_s))
        except (TypeError, ValueError):
            raise _err("replay_gaps_s", "must be a sequence of numbers") from None
        for key in ("model_mix", "gpu_request", "gpu_type_weights"):
            set_(self, key, _as_pairs(key, getattr(self, key)))
        set_(
            self,
            "batch_choices",
            tuple(
                (fam, _as_pairs(f"batch_choices[{fam}]", ch))
                for fam, ch in _as_pairs("batch_choices", self.batch_choices)
            ),
        )
        self._validate()
        # Builtin scalars from here on, so that equality, hashing and to_dict never see numpy types.
        for key in ("model_mix", "gpu_type_weights"):
            set_(self, key, tuple((str(k), float(w)) for k, w in getattr(self, key)))
        set_(self, "gpu_request", tuple((int(k), float(w)) for k, w in self.gpu_request))
        set_(
            self,
            "batch_choices",
            tuple(
                (str(fam), tuple((int(b), float(w)) for b, w in ch))
                for fam, ch in self.batch_choices
            ),
        )
        for key in ("mean_interarrival_s", "iterations_log_mu", "iterations_log_sigma"):
            set_(self, key, float(getattr(self, key)))
        for key in ("num_jobs", "iterations_min", "iterations_max"):
            set_(self, key, int(getattr(self, key)))

    def _validate(self) -> None:
        if not _is_int(self.num_jobs) or self.num_jobs < 1:
            raise _err("num_jobs", f"{self.num_jobs!r} is not an integer >= 1")
        for key in ("mean_interarrival_s", "iterations_log_mu", "iterations_log_sigma"):
            if not _is_real(getattr(self, key)):
                raise _err(key, f"{getattr(self, key)!r} is not a number")
        if not math.isfinite(self.mean_interarrival_s) or self.mean_interarrival_s <= 0:
            raise _err("mean_interarrival_s", "must be finite and > 0")
        if self.arrival not in ("poisson", "replay"):
            raise _err("arrival", f"{self.arrival!r} is not 'poisson' or 'replay'")
        if self.arrival == "replay":
            gaps = self.replay_gaps_s
            if not gaps:
                raise _err("replay_gaps_s", "arrival 'replay' needs at least one gap")
            if any(not math.isfinite(g) or g < 0 for g in gaps):
                raise _err("replay_gaps_s", "gaps must be finite and >= 0")
            if sum(gaps) <= 0:
                raise _err("replay_gaps_s", "gaps must not all be 0")
        _check_weights("model_mix", self.model_mix, allow_empty=False)
        for model, _ in self.model_mix:
            if not isinstance(model, str) or not model.strip():
                raise _err("model_mix", f"{model!r} is not a model name")
        families = [fam for fam, _ in self.batch_choices]
        if not families:
            raise _err("batch_choices", "must not be empty")
        if len(set(families)) != len(families):
            raise _err("batch_choices", "families must be unique")
        for family, choices in self.batch_choices:
            _check_weights(f"batch_choices[{family}]", choices, allow_empty=False)
            _check_positive_ints(f"batch_choices[{family}]", choices)
        _check_weights("gpu_request", self.gpu_request, allow_empty=False)
        _check_positive_ints("gpu_request", self.gpu_request)
        for count, _ in self.gpu_request:
            if count & (count - 1):
                raise _err("gpu_request", f"{count} is not a power of two")
        _check_weights("gpu_type_weights", self.gpu_type_weights, allow_empty=True)
        if not math.isfinite(self.iterations_log_mu):
            raise _err("iterations_log_mu", "must be finite")
        if not math.isfinite(self.iterations_log_sigma) or self.iterations_log_sigma < 0:
            raise _err("iterations_log_sigma", "must be finite and >= 0")
        for name in ("iterations_min", "iterations_max"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise _err(name, f"{value!r} is not a positive integer")
        if self.iterations_max < self.iterations_min:
            raise _err("iterations_max", "must be >= iterations_min")

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> SyntheticConfig:
        """Build a configuration from a mapping (e.g. a scenario file's ``workload`` section).

        Raises:
            ConfigError: an unknown key, or an invalid value (naming the field).
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise ConfigError(
                f"SyntheticConfig: unknown key(s) {', '.join(unknown)}; known: "
                f"{', '.join(sorted(known))}"
            )
        return cls(**dict(raw))

    def to_dict(self) -> dict[str, Any]:
        """Plain-data form (tuples as lists, pairs as mappings) that :meth:`from_mapping` reads."""
        out = asdict(self)
        out["replay_gaps_s"] = list(self.replay_gaps_s)
        for key in ("model_mix", "gpu_request", "gpu_type_weights"):
            out[key] = dict(getattr(self, key))
        out["batch_choices"] = {fam: dict(ch) for fam, ch in self.batch_choices}
        return out


def _canonical_type(name: str) -> str:
    # Types the packaged catalogue knows are compared by canonical name (so "a100" matches
    # "a100-40gb"); others (custom catalogues) by lower-case name.
    catalog = load_gpu_catalog()
    return catalog.canonical(name) if name in catalog else name.strip().lower()


def _cdf(weights: Sequence[float]) -> npt.NDArray[np.float64]:
    # Dividing by the last partial sum makes cdf[-1] exactly 1.
    cdf: npt.NDArray[np.float64] = np.cumsum(np.asarray(weights, dtype=np.float64))
    out: npt.NDArray[np.float64] = cdf / cdf[-1]
    return out


def _pick(cdf: npt.NDArray[np.float64], u: npt.NDArray[np.float64]) -> npt.NDArray[np.intp]:
    # side="right" skips zero-weight entries (their cdf step is empty); u < 1 = cdf[-1], the clip is
    # belt and braces.
    idx = np.searchsorted(cdf, u, side="right")
    return np.minimum(idx, len(cdf) - 1)


def cluster_type_weights(config: SyntheticConfig, gpu_types: Sequence[str]) -> dict[str, float]:
    """Probabilities of each of the cluster's GPU types as a requested type.

    Args:
        config: the workload configuration (its ``gpu_type_weights``).
        gpu_types: GPU types present in the cluster (canonical names or aliases).

    Returns:
        Canonical type -> probability over the cluster's types (summing to 1), in the order given.

    Raises:
        ConfigError: no cluster types, or every cluster type has weight 0 in the configuration.
    """
    types = list(dict.fromkeys(_canonical_type(t) for t in gpu_types))
    if not types:
        raise _err("gpu_type_weights", "the cluster has no GPU types to request")
    if not config.gpu_type_weights:
        return {t: 1.0 / len(types) for t in types}
    table: dict[str, float] = {}
    for t, w in config.gpu_type_weights:
        key = _canonical_type(t)
        table[key] = table.get(key, 0.0) + float(w)
    weights = [table.get(t, 0.0) for t in types]
    total = sum(weights)
    if total <= 0:
        raise _err(
            "gpu_type_weights",
            f"none of the cluster's GPU types ({', '.join(types)}) has a positive weight; give "
            f"them weights, pass an empty mapping for uniform requests, or set request_types "
            f"to false",
        )
    return {t: w / total for t, w in zip(types, weights, strict=True)}


def generate(
    config: SyntheticConfig,
    rng: np.random.Generator,
    gpu_types: Sequence[str],
    models: ModelCatalog | None = None,
    name: str = "synthetic",
) -> Trace:
    """Generate one synthetic trace.

    The first job arrives at 0 s. Job ids are ``f"{name}-{i:05d}"`` in arrival order. The same
    generator state gives the same trace.

    Args:
        config: the workload description.
        rng: the only source of randomness; it is advanced.
        gpu_types: GPU types of the cluster; requested types are drawn among these only (ignored
            when ``config.request_types`` is False).
        models: catalogue resolving ``config.model_mix`` (default: the packaged one).
        name: trace name and job-id prefix.

    Returns:
        A trace of ``config.num_jobs`` jobs without deadlines.

    Raises:
        UnknownNameError: a model of ``model_mix`` is not in the catalogue.
        ConfigError: a model's family has no ``batch_choices`` entry, or no cluster type can be
            requested (see :func:`cluster_type_weights`).
    """
    models = models or load_model_catalog()
    n = config.num_jobs
    specs = [models.get(m) for m, _ in config.model_mix]
    batch_table = dict(config.batch_choices)
    for spec in specs:
        if spec.family not in batch_table:
            raise _err(
                "batch_choices",
                f"no entry for family {spec.family!r} (model {spec.name}); have "
                f"{', '.join(batch_table)}",
            )
    type_probs = cluster_type_weights(config, gpu_types) if config.request_types else {}

    # Fixed draw order (module docstring): switches never shift the other attributes' streams.
    u_model = rng.random(n)
    u_batch = rng.random(n)
    u_gpus = rng.random(n)
    u_type = rng.random(n)
    z_iter = rng.standard_normal(n)
    if config.arrival == "poisson":
        gaps = rng.exponential(config.mean_interarrival_s, size=n - 1)
    else:
        pool = np.asarray(config.replay_gaps_s, dtype=np.float64)
        gaps = pool[rng.integers(len(pool), size=n - 1)] * (
            config.mean_interarrival_s / float(pool.mean())
        )
    arrivals = np.concatenate(([0.0], np.cumsum(gaps)))

    model_idx = _pick(_cdf([w for _, w in config.model_mix]), u_model)
    batches = np.zeros(n, dtype=np.int64)
    families = np.array([specs[i].family for i in model_idx])
    for family, choices in batch_table.items():
        mask = families == family
        if mask.any():
            values = np.array([b for b, _ in choices], dtype=np.int64)
            batches[mask] = values[_pick(_cdf([w for _, w in choices]), u_batch[mask])]
    counts = np.array([c for c, _ in config.gpu_request], dtype=np.int64)
    gpus = counts[_pick(_cdf([w for _, w in config.gpu_request]), u_gpus)]
    type_names = list(type_probs)
    type_idx = _pick(_cdf(list(type_probs.values())), u_type) if type_probs else None
    # Clip in log space so that an extreme normal never overflows exp().
    log_lo, log_hi = math.log(config.iterations_min), math.log(config.iterations_max)
    log_iters = np.clip(
        config.iterations_log_mu + config.iterations_log_sigma * z_iter, log_lo, log_hi
    )
    iters = np.clip(np.rint(np.exp(log_iters)), config.iterations_min, config.iterations_max)

    jobs = tuple(
        Job(
            job_id=f"{name}-{i:05d}",
            arrival_s=float(arrivals[i]),
            model=specs[int(model_idx[i])],
            global_batch=int(batches[i]),
            iterations=int(iters[i]),
            requested_gpus=int(gpus[i]) if config.request_gpus else None,
            requested_gpu_type=type_names[int(type_idx[i])] if type_idx is not None else None,
        )
        for i in range(n)
    )
    return Trace(name, jobs)


def interarrival_gaps(trace: Trace) -> tuple[float, ...]:
    """Gaps between consecutive arrivals of a trace, seconds (input of ``arrival='replay'``)."""
    return tuple(b.arrival_s - a.arrival_s for a, b in itertools.pairwise(trace.jobs))


def interarrival_for_load(load: float, total_gpus: int, mean_job_gpu_seconds: float) -> float:
    """Mean inter-arrival gap that offers a given load to a cluster.

    Offered load is the GPU-seconds jobs bring per second over the cluster's GPUs:
    ``load = mean_job_gpu_seconds / (gap × total_gpus)``, hence
    ``gap = mean_job_gpu_seconds / (load × total_gpus)``.

    Args:
        load: offered load, a fraction of the cluster's GPU-seconds (1.0 = saturated).
        total_gpus: GPUs in the cluster.
        mean_job_gpu_seconds: mean GPUs × run time of a job, GPU-seconds.

    Returns:
        The mean inter-arrival gap, seconds.

    Raises:
        ConfigError: a non-positive or non-finite argument.
    """
    if not math.isfinite(load) or load <= 0:
        raise ConfigError(f"load must be finite and > 0, got {load!r}")
    if total_gpus < 1:
        raise ConfigError(f"total_gpus must be >= 1, got {total_gpus!r}")
    if not math.isfinite(mean_job_gpu_seconds) or mean_job_gpu_seconds <= 0:
        raise ConfigError(
            f"mean_job_gpu_seconds must be finite and > 0, got {mean_job_gpu_seconds!r}"
        )
    return mean_job_gpu_seconds / (load * total_gpus)


def split_rng(seed: int, split: str, index: int) -> np.random.Generator:
    """Generator of trace ``index`` of a split, independent of every other (seed, split, index).

    The stream is seeded by ``SeedSequence(entropy=(seed, split id, index))`` with split ids
    train 0, val 1, test 2, so the train, validation and test traces never share a stream.

    Args:
        seed: experiment seed, 0 <= seed < 2**32.
        split: ``train``, ``val`` or ``test``.
        index: trace number within the split, 0 <= index < 2**32.

    Raises:
        UnknownNameError: unknown split.
        ConfigError: seed or index out of range.
    """
    if split not in SPLITS:
        raise UnknownNameError("split", split, SPLITS)
    for label, value in (("seed", seed), ("index", index)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ConfigError(f"{label} must be an integer, got {value!r}")
        if not 0 <= value < _ENTROPY_LIMIT:
            raise ConfigError(f"{label} must be in [0, 2**32), got {value}")
    return np.random.default_rng(np.random.SeedSequence((int(seed), SPLITS[split], int(index))))


def split_traces(
    config: SyntheticConfig,
    seed: int,
    split: str,
    count: int,
    gpu_types: Sequence[str],
    models: ModelCatalog | None = None,
) -> list[Trace]:
    """Generate ``count`` traces of a split, named ``f"{split}-{index}"``.

    Trace ``index`` depends only on ``(config, seed, split, index, gpu_types)``: asking for more
    traces later extends the list without changing the first ones.

    Args:
        config: the workload description.
        seed: experiment seed (see :func:`split_rng`).
        split: ``train``, ``val`` or ``test``.
        count: traces to generate (>= 0).
        gpu_types: GPU types of the cluster.
        models: catalogue resolving the model mix (default: the packaged one).
    """
    if count < 0:
        raise ConfigError(f"count must be >= 0, got {count}")
    return [
        generate(config, split_rng(seed, split, i), gpu_types, models, name=f"{split}-{i}")
        for i in range(count)
    ]


def fit_synthetic_config(trace: Trace, **overrides: Any) -> SyntheticConfig:
    """Fit a configuration to a trace (how the Philly defaults were made).

    Model mix, batch per family, GPU counts and GPU types get the trace's counts as weights;
    iterations get the maximum-likelihood log-normal (mean and population standard deviation of
    ln(iterations)) clipped to the observed range; the mean gap is (last - first arrival) /
    (jobs - 1); ``num_jobs`` is the trace length.

    Args:
        trace: at least two jobs, with requested GPU counts and types.
        **overrides: fields to set instead of the fitted values (e.g. ``arrival``).

    Raises:
        ConfigError: the trace has fewer than two jobs or no GPU requests.
    """
    jobs = trace.jobs
    if len(jobs) < 2:
        raise ConfigError(f"trace {trace.name}: need at least two jobs to fit, got {len(jobs)}")

    def ranked(counter: Counter[Any]) -> tuple[tuple[Any, float], ...]:
        # Most frequent first, ties by value: a stable, readable order for the printed defaults.
        return tuple(
            (k, float(c)) for k, c in sorted(counter.items(), key=lambda kc: (-kc[1], str(kc[0])))
        )

    per_family: dict[str, Counter[int]] = {}
    for j in jobs:
        per_family.setdefault(j.model.family, Counter())[j.global_batch] += 1
    logs = np.log([j.iterations for j in jobs])
    fitted: dict[str, Any] = {
        "num_jobs": len(jobs),
        "mean_interarrival_s": (jobs[-1].arrival_s - jobs[0].arrival_s) / (len(jobs) - 1),
        "model_mix": ranked(Counter(j.model.name for j in jobs)),
        "batch_choices": tuple(
            (fam, tuple((b, float(c)) for b, c in sorted(per_family[fam].items())))
            for fam in sorted(per_family)
        ),
        "gpu_request": tuple(
            (g, float(c))
            for g, c in sorted(Counter(j.requested_gpus for j in jobs if j.requested_gpus).items())
        ),
        "gpu_type_weights": ranked(
            Counter(j.requested_gpu_type for j in jobs if j.requested_gpu_type)
        ),
        "iterations_log_mu": float(logs.mean()),
        "iterations_log_sigma": float(logs.std()),
        "iterations_min": min(j.iterations for j in jobs),
        "iterations_max": max(j.iterations for j in jobs),
    }
    if not fitted["gpu_request"]:
        raise ConfigError(f"trace {trace.name}: no job requests a GPU count")
    fitted.update(overrides)
    return SyntheticConfig.from_mapping(fitted)


#: Workload presets besides the Philly defaults: Helios- and PAI-like statistics fitted to the
#: Arena ``venus`` and ``pai`` traces (read with ÷5, as the artifact reads them) by
#: ``python experiments/fit_workload.py --trace venus|pai --preset``; stored in
#: ``crius_gym/data/workload_presets.yaml``.
PRESETS_FILE = "workload_presets.yaml"


@functools.cache
def synthetic_preset(name: str) -> SyntheticConfig:
    """A named workload: ``philly`` (the defaults), ``helios`` or ``pai``.

    Raises:
        UnknownNameError: an unknown preset (listing the known ones).
    """
    if name == "philly":
        return SyntheticConfig()
    text = (resources.files("crius_gym") / "data" / PRESETS_FILE).read_text(encoding="utf-8")
    raw = load_yaml(text, f"crius_gym/data/{PRESETS_FILE}") or {}
    if name not in raw:
        raise UnknownNameError("workload preset", name, ["philly", *raw])
    return SyntheticConfig.from_mapping(raw[name])
