"""Model catalogue: typed architecture records for transformers, MoE and Wide-ResNet.

The records say what a model *is* (shape, precision, optimizer); what it *costs* (FLOPs, bytes,
memory) is computed in :mod:`crius_gym.perf.layers`.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, Literal

from crius_gym.errors import ConfigError, InputFileError, UnknownNameError
from crius_gym.wholenumbers import parse_whole
from crius_gym.yamlfile import load_yaml, load_yaml_file

Dtype = Literal["fp16", "bf16", "fp32"]
Optimizer = Literal["adamw", "adafactor", "sgd_momentum"]
DTYPE_BYTES: dict[str, int] = {"fp16": 2, "bf16": 2, "fp32": 4}
_DTYPES = ("fp16", "bf16", "fp32")
_OPTIMIZERS = ("adamw", "adafactor", "sgd_momentum")


def _check_common(name: str, dtype: str, optimizer: str) -> None:
    if dtype not in _DTYPES:
        raise ConfigError(f"model {name}: dtype {dtype!r} not in {_DTYPES}")
    if optimizer not in _OPTIMIZERS:
        raise ConfigError(f"model {name}: optimizer {optimizer!r} not in {_OPTIMIZERS}")


@dataclass(frozen=True)
class TransformerSpec:
    """A dense decoder/encoder transformer (BERT, GPT, LLaMA).

    Attributes:
        name: catalogue name.
        family: ``bert``, ``gpt`` or ``llama``.
        hidden_size: h.
        num_layers: l.
        num_heads: a (attention heads).
        seq_len: s, tokens per sample.
        vocab_size: V.
        dtype: training precision of weights and activations.
        ffn_hidden_size: FFN inner size (0 means 4h).
        gated_ffn: SwiGLU-style FFN with three matrices.
        num_kv_heads: KV heads for grouped-query attention (0 means ``num_heads``).
        tied_embeddings: the output head shares the input embedding.
        optimizer: optimizer whose states are held per parameter.
    """

    name: str
    family: str
    hidden_size: int
    num_layers: int
    num_heads: int
    seq_len: int
    vocab_size: int
    dtype: Dtype = "fp16"
    ffn_hidden_size: int = 0
    gated_ffn: bool = False
    num_kv_heads: int = 0
    tied_embeddings: bool = True
    optimizer: Optimizer = "adamw"

    def __post_init__(self) -> None:
        _check_common(self.name, self.dtype, self.optimizer)
        for f in ("hidden_size", "num_layers", "num_heads", "seq_len", "vocab_size"):
            if int(getattr(self, f)) < 1:
                raise ConfigError(f"model {self.name}: {f} must be >= 1")
        if self.hidden_size % self.num_heads:
            raise ConfigError(f"model {self.name}: hidden_size must be divisible by num_heads")
        if self.ffn_hidden_size == 0:
            object.__setattr__(self, "ffn_hidden_size", 4 * self.hidden_size)
        if self.num_kv_heads == 0:
            object.__setattr__(self, "num_kv_heads", self.num_heads)

    @property
    def max_tensor_parallel(self) -> int:
        """Largest useful tensor-parallel degree: attention heads split evenly."""
        return self.num_kv_heads


@dataclass(frozen=True)
class MoESpec:
    """A GShard-style mixture-of-experts transformer (as in the Arena artifact).

    Every ``moe_every``-th layer (starting with the first) replaces its FFN by ``num_experts``
    experts with top-``top_k`` routing; tokens are routed in groups of ``expert_group_size``.

    Attributes:
        name: catalogue name.
        family: ``moe``.
        hidden_size: h.
        num_layers: l.
        num_heads: a.
        seq_len: s.
        vocab_size: V.
        num_experts: E.
        expert_group_size: tokens per routing group (S).
        dtype: training precision.
        ffn_factor: FFN inner size as a multiple of h (dense and expert FFNs).
        moe_every: one MoE layer every this many layers.
        top_k: experts per token.
        capacity_factor: expert capacity as a multiple of the fair share (tokens·top_k / E).
        tied_embeddings: output head shares the input embedding.
        optimizer: optimizer whose states are held per parameter.
    """

    name: str
    family: str
    hidden_size: int
    num_layers: int
    num_heads: int
    seq_len: int
    vocab_size: int
    num_experts: int
    expert_group_size: int = 2048
    dtype: Dtype = "fp16"
    ffn_factor: int = 8
    moe_every: int = 2
    top_k: int = 2
    capacity_factor: float = 1.0
    tied_embeddings: bool = False
    optimizer: Optimizer = "adafactor"

    def __post_init__(self) -> None:
        _check_common(self.name, self.dtype, self.optimizer)
        for f in (
            "hidden_size",
            "num_layers",
            "num_heads",
            "seq_len",
            "vocab_size",
            "num_experts",
            "expert_group_size",
            "ffn_factor",
            "moe_every",
            "top_k",
        ):
            if int(getattr(self, f)) < 1:
                raise ConfigError(f"model {self.name}: {f} must be >= 1")

    @property
    def max_tensor_parallel(self) -> int:
        """Largest useful tensor-parallel degree."""
        return self.num_heads


@dataclass(frozen=True)
class WideResNetSpec:
    """A Wide-ResNet (Alpa's bottleneck variant: the 3×3 convolution is ``width_factor`` wider).

    Attributes:
        name: catalogue name.
        family: ``wide_resnet``.
        resnet_layers: depth (50 → stages of 3, 4, 6, 3 bottleneck blocks; 101 → 3, 4, 23, 3).
        width_factor: multiplier of the 3×3 convolution's output channels.
        num_filters: channels of the first stage (doubling per stage).
        image_size: input resolution (square), pixels.
        num_classes: classifier outputs.
        dtype: training precision (fp32 in the Arena artifact).
        optimizer: optimizer whose states are held per parameter.
    """

    name: str
    family: str
    resnet_layers: int
    width_factor: int
    num_filters: int
    image_size: int = 224
    num_classes: int = 1024
    dtype: Dtype = "fp32"
    optimizer: Optimizer = "sgd_momentum"

    STAGES: ClassVar[dict[int, tuple[int, ...]]] = {
        50: (3, 4, 6, 3),
        101: (3, 4, 23, 3),
        152: (3, 8, 36, 3),
        200: (3, 24, 36, 3),
    }

    def __post_init__(self) -> None:
        _check_common(self.name, self.dtype, self.optimizer)
        if self.resnet_layers not in self.STAGES:
            raise ConfigError(
                f"model {self.name}: resnet_layers must be one of {sorted(self.STAGES)}"
            )
        for f in ("width_factor", "num_filters", "image_size", "num_classes"):
            if int(getattr(self, f)) < 1:
                raise ConfigError(f"model {self.name}: {f} must be >= 1")

    @property
    def stage_sizes(self) -> tuple[int, ...]:
        """Bottleneck blocks per stage."""
        return self.STAGES[self.resnet_layers]

    @property
    def max_tensor_parallel(self) -> int:
        """Largest useful tensor (channel) parallel degree."""
        return 64


ModelSpec = TransformerSpec | MoESpec | WideResNetSpec

_FAMILY_CLASS: dict[str, type[TransformerSpec] | type[MoESpec] | type[WideResNetSpec]] = {
    "bert": TransformerSpec,
    "gpt": TransformerSpec,
    "llama": TransformerSpec,
    "moe": MoESpec,
    "wide_resnet": WideResNetSpec,
}
FAMILIES: tuple[str, ...] = tuple(_FAMILY_CLASS)


def build_model(name: str, family: str, values: Mapping[str, Any]) -> ModelSpec:
    """Build a model record from a family and a mapping of its fields.

    Unknown keys and blank values are ignored so that wide tables (e.g. measurement CSVs with
    columns for every family) can be passed directly; missing required fields raise.

    Raises:
        UnknownNameError: the family is unknown.
        ConfigError: a required field is missing or a value is invalid (naming the field).
    """
    try:
        cls = _FAMILY_CLASS[family]
    except KeyError:
        raise UnknownNameError("model family", family, _FAMILY_CLASS) from None
    kwargs: dict[str, Any] = {"name": name, "family": family}
    for f in fields(cls):
        if f.name in kwargs or f.name not in values:
            continue
        raw = values[f.name]
        if raw is None or (isinstance(raw, str) and raw.strip() == ""):
            continue
        if isinstance(raw, float) and raw != raw:  # NaN from pandas
            continue
        ftype = str(f.type)
        try:
            if "bool" in ftype:
                kwargs[f.name] = (
                    raw
                    if isinstance(raw, bool)
                    else str(raw).strip().lower() in ("1", "true", "yes")
                )
            elif ftype == "int":
                # Exactly: 2.5 is not 2, inf and nan are not integers, 2**53 + 1 stays itself.
                kwargs[f.name] = parse_whole(str(raw))
            elif ftype == "float":
                kwargs[f.name] = float(raw)
                if not math.isfinite(kwargs[f.name]):
                    raise ValueError(raw)
            else:
                kwargs[f.name] = str(raw).strip()
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                f"model {name}: field {f.name}={raw!r} is not a valid {ftype}"
            ) from exc
    try:
        return cls(**kwargs)
    except TypeError as exc:
        missing = re.findall(r"'(\w+)'", str(exc))
        raise ConfigError(
            f"model {name} ({family}): missing required field(s) {', '.join(missing) or exc}"
        ) from exc


def normalise_model_name(name: str) -> str:
    """Map ``bert__760M`` (Arena trace form) or ``BERT-760M`` to catalogue form ``bert-760m``."""
    return name.strip().lower().replace("__", "-")


class ModelCatalog:
    """Models by name."""

    def __init__(self, models: Mapping[str, ModelSpec]) -> None:
        self._models = dict(models)

    @property
    def names(self) -> tuple[str, ...]:
        """Catalogue names."""
        return tuple(self._models)

    def get(self, name: str) -> ModelSpec:
        """Return the model ``name`` (catalogue or Arena ``family__Size`` form).

        Raises:
            UnknownNameError: listing every known model.
        """
        key = normalise_model_name(name)
        try:
            return self._models[key]
        except KeyError:
            raise UnknownNameError("model", name, self._models) from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalise_model_name(name) in self._models

    def with_model(self, spec: ModelSpec) -> ModelCatalog:
        """Return a catalogue that also holds ``spec`` (replacing a model of the same name)."""
        return ModelCatalog({**self._models, spec.name: spec})


def parse_model_catalog(raw: Mapping[str, Any], path: str | Path) -> ModelCatalog:
    """Build a catalogue from the parsed YAML mapping (see ``crius_gym/data/models.yaml``).

    Raises:
        InputFileError: naming the file and the model at fault.
    """
    if not isinstance(raw, Mapping) or "models" not in raw:
        raise InputFileError(path, "expected a top-level key 'models'")
    defaults: Mapping[str, Mapping[str, Any]] = raw.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise InputFileError(path, "must map families to default values", field="defaults")
    if not isinstance(raw["models"], Mapping):
        raise InputFileError(path, "must map model names to their fields", field="models")
    models: dict[str, ModelSpec] = {}
    for name, entry in raw["models"].items():
        if not isinstance(entry, Mapping) or "family" not in entry:
            raise InputFileError(path, "each model needs a 'family'", field=f"models.{name}")
        family = str(entry["family"])
        family_defaults = defaults.get(family) or {}
        if not isinstance(family_defaults, Mapping):
            raise InputFileError(path, "must be a mapping", field=f"defaults.{family}")
        values = {**family_defaults, **entry}
        try:
            models[str(name)] = build_model(str(name), family, values)
        except (ConfigError, UnknownNameError) as exc:
            raise InputFileError(path, str(exc), field=f"models.{name}") from exc
    return ModelCatalog(models)


@functools.cache
def load_model_catalog(path: str | None = None) -> ModelCatalog:
    """Load the model catalogue (the packaged one by default). Cached: catalogues are immutable."""
    if path is None:
        text = (resources.files("crius_gym") / "data" / "models.yaml").read_text(encoding="utf-8")
        where = "crius_gym/data/models.yaml"
    else:
        raw, where = load_yaml_file(path), path
        return parse_model_catalog(raw, where)
    raw = load_yaml(text, where)
    return parse_model_catalog(raw, where)


def renamed(spec: ModelSpec, name: str) -> ModelSpec:
    """Return ``spec`` under another name."""
    return replace(spec, name=name)
