"""GPU and link catalogue: typed records loaded from ``crius_gym/data/gpus.yaml``."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from crius_gym.errors import ConfigError, InputFileError, UnknownNameError
from crius_gym.yamlfile import load_yaml, load_yaml_file

Dtype = Literal["fp16", "bf16", "fp32"]


@dataclass(frozen=True)
class LinkSpec:
    """A link or network.

    Attributes:
        name: catalogue key, e.g. ``nvlink3`` or ``ib-hdr``.
        bandwidth_gbps: nominal bandwidth per direction, GB/s (per GPU for intra-node links, per
            NIC for inter-node networks).
        latency_us: latency per message, microseconds.
        scope: ``intra`` (inside a node) or ``inter`` (between nodes).
    """

    name: str
    bandwidth_gbps: float
    latency_us: float
    scope: Literal["intra", "inter"]

    def __post_init__(self) -> None:
        if self.bandwidth_gbps <= 0 or self.latency_us < 0:
            raise ConfigError(f"link {self.name}: bandwidth must be > 0 and latency >= 0")
        if self.scope not in ("intra", "inter"):
            raise ConfigError(f"link {self.name}: scope must be 'intra' or 'inter'")


@dataclass(frozen=True)
class GPUSpec:
    """One GPU type.

    Attributes:
        name: canonical catalogue key, e.g. ``a100-40gb``.
        description: human-readable name.
        memory_gb: device memory, GB.
        fp16_tflops: dense FP16/BF16 tensor-core peak, TFLOP/s.
        fp32_tflops: FP32 (non-tensor) datasheet peak, TFLOP/s.
        tf32_tflops: dense TF32 tensor peak, TFLOP/s, or None where TF32 does not exist.
        hbm_gbps: device memory bandwidth, GB/s.
        intra_link: default GPU-to-GPU link inside a node.
        gpus_per_node: usual node size (scenarios may override it).
        fp32_dual_issue: the FP32 datasheet peak counts dual issue (see gpus.yaml).
    """

    name: str
    description: str
    memory_gb: float
    fp16_tflops: float
    fp32_tflops: float
    tf32_tflops: float | None
    hbm_gbps: float
    intra_link: LinkSpec
    gpus_per_node: int
    fp32_dual_issue: bool

    def __post_init__(self) -> None:
        for field in ("memory_gb", "fp16_tflops", "fp32_tflops", "hbm_gbps"):
            if getattr(self, field) <= 0:
                raise ConfigError(f"GPU {self.name}: {field} must be > 0")
        if self.gpus_per_node < 1:
            raise ConfigError(f"GPU {self.name}: gpus_per_node must be >= 1")

    @property
    def memory_bytes(self) -> float:
        """Device memory in bytes."""
        return self.memory_gb * 1e9

    def peak_flops(self, dtype: Dtype) -> float:
        """Return the peak a training kernel of this precision can approach, in FLOP/s.

        fp16/bf16 use the tensor-core peak; fp32 uses the FP32 peak, halved on dual-issue parts.
        """
        if dtype in ("fp16", "bf16"):
            return self.fp16_tflops * 1e12
        fp32 = self.fp32_tflops / 2 if self.fp32_dual_issue else self.fp32_tflops
        return fp32 * 1e12


class GPUCatalog:
    """GPU types and links by name, with the short aliases public traces use."""

    def __init__(
        self, gpus: dict[str, GPUSpec], links: dict[str, LinkSpec], aliases: dict[str, str]
    ) -> None:
        self._gpus = dict(gpus)
        self._links = dict(links)
        self._aliases = {k.lower(): v for k, v in aliases.items()}
        for alias, target in self._aliases.items():
            if target not in self._gpus:
                raise ConfigError(f"GPU alias {alias!r} points to unknown GPU {target!r}")

    @property
    def names(self) -> tuple[str, ...]:
        """Canonical GPU names."""
        return tuple(self._gpus)

    @property
    def aliases(self) -> dict[str, str]:
        """Alias → canonical name."""
        return dict(self._aliases)

    def canonical(self, name: str) -> str:
        """Return the canonical name of a GPU given by name or alias (case-insensitive).

        Raises:
            UnknownNameError: listing every known name and alias.
        """
        key = name.strip().lower()
        if key in self._gpus:
            return key
        if key in self._aliases:
            return self._aliases[key]
        raise UnknownNameError("GPU type", name, [*self._gpus, *self._aliases])

    def gpu(self, name: str) -> GPUSpec:
        """Return the GPU named ``name`` (canonical name or alias)."""
        return self._gpus[self.canonical(name)]

    def link(self, name: str) -> LinkSpec:
        """Return the link or network named ``name``."""
        try:
            return self._links[name]
        except KeyError:
            raise UnknownNameError("link", name, self._links) from None

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        key = name.strip().lower()
        return key in self._gpus or key in self._aliases


def _require(entry: dict[str, Any], key: str, path: Path | str, where: str) -> Any:
    if key not in entry:
        raise InputFileError(path, f"{where} lacks required key", field=key)
    return entry[key]


def parse_gpu_catalog(raw: dict[str, Any], path: Path | str) -> GPUCatalog:
    """Build a catalogue from the parsed YAML mapping (see ``crius_gym/data/gpus.yaml``).

    Raises:
        InputFileError: naming the file, the entry and the key at fault.
    """
    if not isinstance(raw, dict) or "gpus" not in raw or "links" not in raw:
        raise InputFileError(path, "expected top-level keys 'gpus' and 'links'")
    links: dict[str, LinkSpec] = {}
    for name, entry in raw["links"].items():
        try:
            links[name] = LinkSpec(
                name=name,
                bandwidth_gbps=float(_require(entry, "bandwidth_gbps", path, f"link {name}")),
                latency_us=float(_require(entry, "latency_us", path, f"link {name}")),
                scope=_require(entry, "scope", path, f"link {name}"),
            )
        except (TypeError, ValueError, ConfigError) as exc:
            raise InputFileError(path, str(exc), field=f"links.{name}") from exc
    gpus: dict[str, GPUSpec] = {}
    for name, entry in raw["gpus"].items():
        where = f"gpus.{name}"
        try:
            link_name = _require(entry, "intra_link", path, where)
            if link_name not in links:
                raise InputFileError(
                    path, f"unknown link {link_name!r}", field=f"{where}.intra_link"
                )
            tf32 = entry.get("tf32_tflops")
            gpus[name] = GPUSpec(
                name=name,
                description=str(entry.get("description", name)),
                memory_gb=float(_require(entry, "memory_gb", path, where)),
                fp16_tflops=float(_require(entry, "fp16_tflops", path, where)),
                fp32_tflops=float(_require(entry, "fp32_tflops", path, where)),
                tf32_tflops=None if tf32 is None else float(tf32),
                hbm_gbps=float(_require(entry, "hbm_gbps", path, where)),
                intra_link=links[link_name],
                gpus_per_node=int(_require(entry, "gpus_per_node", path, where)),
                fp32_dual_issue=bool(entry.get("fp32_dual_issue", False)),
            )
        except (TypeError, ValueError, ConfigError) as exc:
            if isinstance(exc, InputFileError):
                raise
            raise InputFileError(path, str(exc), field=where) from exc
    aliases = {str(k): str(v) for k, v in (raw.get("aliases") or {}).items()}
    try:
        return GPUCatalog(gpus, links, aliases)
    except ConfigError as exc:
        raise InputFileError(path, str(exc), field="aliases") from exc


@functools.cache
def load_gpu_catalog(path: str | None = None) -> GPUCatalog:
    """Load the GPU catalogue (the packaged one by default). Cached: catalogues are immutable.

    Args:
        path: an alternative YAML file with the same schema.
    """
    if path is None:
        source = resources.files("crius_gym") / "data" / "gpus.yaml"
        text = source.read_text(encoding="utf-8")
        where: str = "crius_gym/data/gpus.yaml"
    else:
        raw, where = load_yaml_file(path), path
        return parse_gpu_catalog(raw, where)
    raw = load_yaml(text, where)
    return parse_gpu_catalog(raw, where)
