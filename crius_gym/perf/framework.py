"""Training-framework profiles (how a framework executes a plan), from ``data/frameworks.yaml``."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Literal, get_args

from crius_gym.errors import ConfigError, InputFileError, UnknownNameError
from crius_gym.perf.layers import LayerKind
from crius_gym.perf.plan import RECOMPUTE_MODES, Recompute
from crius_gym.yamlfile import load_yaml

_LAYER_KINDS: tuple[str, ...] = get_args(LayerKind)


@dataclass(frozen=True)
class FrameworkProfile:
    """Structural facts about one training framework.

    Attributes:
        name: the profile's name (``alpa``, ``megatron``, ``megatron-deepspeed``).
        calibration: the framework whose fitted constants this profile uses (empty or its own
            name unless it runs another framework's kernels: Megatron-DeepSpeed uses
            Megatron-LM's).
        microbatches: fixed microbatch count per iteration, or None to search microbatch sizes.
        microbatch_sizes: per-replica microbatch sizes searched when ``microbatches`` is None.
        recompute_options: activation recomputation modes the plan search tries.
        max_interleave: the interleaved 1F1B schedule's virtual stages per GPU that the plan
            search tries: every v <= max_interleave that divides the layers of each stage
            (1 = plain 1F1B only).
        sequence_parallel_options: sequence parallelism on/off options the plan search tries
            (with tensor parallelism only).
        distributed_optimizer_options: whether optimizer states are split over the
            data-parallel ranks (Megatron-LM's distributed optimizer, ZeRO-1-like), as the plan
            search tries it: Alpa always shards them (``prefer_reduce_scatter``).
        fp32_grad_dtypes: the 16-bit model dtypes whose gradients are accumulated and
            all-reduced in fp32 (4 bytes/param); the others keep gradients in the model's dtype.
            YAML key ``fp32_main_grads``: ``true`` (fp16 and bf16), ``false`` or a list.
        usable_memory_fraction: fraction of device memory a plan may use.
        memory_overhead_gb: framework/context memory per GPU, GB.
        partition: ``balanced`` (stages of equal FLOPs over layer clusters) or ``even_layers``
            (the same number of layers per stage; embedding on the first, head on the last).
        layer_clusters: clusters per model family (coarse pipeline and recomputation
            granularity); families absent here are split per layer.
        dp_overlap: fraction of the data-parallel gradient sync hidden behind compute.
        efficiency_work: the work that sets compute efficiency: ``stage`` (per-GPU FLOPs of a
            stage's microbatch; Alpa fuses whole clusters) or ``layer`` (the same divided by the
            stage's layers: GEMM size, as in Megatron-LM's rising FLOP/s with h/t).
        microbatch_grad_sync: layer kinds (``conv``, ``gemm``, …) whose weight gradients are
            synchronised over data parallelism after every microbatch rather than once per
            iteration (Alpa's convolutions: ``docs/estimator.md``, "Convolutions").
        cross_stage_overlap: whether activations sent between pipeline stages overlap other
            compute. False (Alpa: ``enable_overlapping`` off, transfers on the compute stream
            at the start of every pipeline tick): the transfers form their own pipeline, added
            to the compute pipeline (``docs/estimator.md``).
    """

    name: str
    microbatches: int | None
    microbatch_sizes: tuple[int, ...]
    recompute_options: tuple[Recompute, ...]
    max_interleave: int
    distributed_optimizer_options: tuple[bool, ...]
    fp32_grad_dtypes: tuple[str, ...]
    usable_memory_fraction: float
    memory_overhead_gb: float
    partition: Literal["balanced", "even_layers"]
    layer_clusters: Mapping[str, int] = field(default_factory=dict)
    dp_overlap: float = 0.0
    efficiency_work: Literal["stage", "layer"] = "stage"
    sequence_parallel_options: tuple[bool, ...] = (False,)
    calibration: str = ""
    microbatch_grad_sync: tuple[str, ...] = ()
    cross_stage_overlap: bool = True

    def __post_init__(self) -> None:
        if self.microbatches is None and not self.microbatch_sizes:
            raise ConfigError(f"framework {self.name}: give microbatches or microbatch_sizes")
        if not 0 < self.usable_memory_fraction <= 1:
            raise ConfigError(f"framework {self.name}: usable_memory_fraction must be in (0, 1]")
        if not self.recompute_options:
            raise ConfigError(f"framework {self.name}: recompute options needed")
        if self.max_interleave < 1:
            raise ConfigError(f"framework {self.name}: max_interleave must be >= 1")
        bad = [r for r in self.recompute_options if r not in RECOMPUTE_MODES]
        if bad:
            known = ", ".join(RECOMPUTE_MODES)
            raise ConfigError(f"framework {self.name}: recompute options {bad} not in {known}")
        if not self.sequence_parallel_options or not self.distributed_optimizer_options:
            raise ConfigError(
                f"framework {self.name}: sequence_parallel_options and "
                "distributed_optimizer_options needed"
            )
        if self.partition not in ("balanced", "even_layers"):
            raise ConfigError(f"framework {self.name}: partition must be balanced or even_layers")
        if self.efficiency_work not in ("stage", "layer"):
            raise ConfigError(f"framework {self.name}: efficiency_work must be stage or layer")
        if not 0 <= self.dp_overlap <= 1:
            raise ConfigError(f"framework {self.name}: dp_overlap must be in [0, 1]")
        bad_dtypes = [x for x in self.fp32_grad_dtypes if x not in ("fp16", "bf16")]
        if bad_dtypes:
            raise ConfigError(f"framework {self.name}: fp32_main_grads {bad_dtypes} not 16-bit")
        bad_kinds = [k for k in self.microbatch_grad_sync if k not in _LAYER_KINDS]
        if bad_kinds:
            raise ConfigError(
                f"framework {self.name}: microbatch_grad_sync {bad_kinds} not in "
                + ", ".join(_LAYER_KINDS)
            )
        if not self.calibration:  # frozen: the default is filled in once, here
            object.__setattr__(self, "calibration", self.name)

    def __hash__(self) -> int:
        return hash(self.name)

    def gradient_bytes(self, dtype: str, dtype_bytes: int) -> float:
        """Bytes per parameter of a gradient (as held and as all-reduced)."""
        return 4.0 if dtype_bytes < 4 and dtype in self.fp32_grad_dtypes else float(dtype_bytes)


def _grad_dtypes(value: Any) -> tuple[str, ...]:
    if isinstance(value, bool):
        return ("fp16", "bf16") if value else ()
    if isinstance(value, list):
        return tuple(str(x) for x in value)
    raise ConfigError(f"fp32_main_grads must be true, false or a list of dtypes, not {value!r}")


def _parse(name: str, entry: Mapping[str, Any]) -> FrameworkProfile:
    mb = entry.get("microbatches")
    return FrameworkProfile(
        name=name,
        microbatches=None if mb is None else int(mb),
        microbatch_sizes=tuple(int(x) for x in entry.get("microbatch_sizes") or ()),
        recompute_options=tuple(entry["recompute_options"]),
        max_interleave=int(entry["max_interleave"]),
        distributed_optimizer_options=tuple(
            bool(x) for x in entry["distributed_optimizer_options"]
        ),
        fp32_grad_dtypes=_grad_dtypes(entry["fp32_main_grads"]),
        usable_memory_fraction=float(entry["usable_memory_fraction"]),
        memory_overhead_gb=float(entry["memory_overhead_gb"]),
        partition=entry["partition"],
        layer_clusters={str(k): int(v) for k, v in (entry.get("layer_clusters") or {}).items()},
        dp_overlap=float(entry.get("dp_overlap", 0.0)),
        efficiency_work=entry.get("efficiency_work", "stage"),
        sequence_parallel_options=tuple(
            bool(x) for x in entry.get("sequence_parallel_options", [False])
        ),
        calibration=str(entry.get("calibration", name)),
        microbatch_grad_sync=tuple(str(x) for x in entry.get("microbatch_grad_sync") or ()),
        cross_stage_overlap=bool(entry.get("cross_stage_overlap", True)),
    )


@functools.cache
def load_frameworks() -> dict[str, FrameworkProfile]:
    """Load the packaged framework profiles."""
    where = "crius_gym/data/frameworks.yaml"
    raw = load_yaml((resources.files("crius_gym") / "data" / "frameworks.yaml").read_text(), where)
    out: dict[str, FrameworkProfile] = {}
    for name, entry in raw["frameworks"].items():
        try:
            out[name] = _parse(name, entry)
        except (KeyError, TypeError, ValueError, ConfigError) as exc:
            raise InputFileError(where, str(exc), field=f"frameworks.{name}") from exc
    return out


def get_framework(name: str) -> FrameworkProfile:
    """Return the framework profile ``name``.

    Raises:
        UnknownNameError: listing the known frameworks.
    """
    profiles = load_frameworks()
    try:
        return profiles[name]
    except KeyError:
        raise UnknownNameError("framework", name, profiles) from None
