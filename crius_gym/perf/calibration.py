"""Calibrated constants of the estimator, per training framework and GPU type.

The packaged constants (``crius_gym/data/calibration.yaml``) are written by
``python experiments/calibrate_estimator.py``, which records the command, the date and the
calibration split in the file.  A GPU type without its own constants (no public measurements)
uses the framework's ``default_gpu`` entry.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

import yaml

from crius_gym.errors import ConfigError, InputFileError, UnknownNameError
from crius_gym.perf.framework import load_frameworks
from crius_gym.yamlfile import load_yaml, load_yaml_file


@dataclass(frozen=True)
class GPUCalibration:
    """Constants of one GPU type under one framework.

    Attributes:
        eta_max: compute efficiency (fraction of peak) approached by large per-GPU work.
        work_half_gflop: per-GPU work of a stage's microbatch (GFLOP) at which efficiency is half
            of ``eta_max``; models small-kernel inefficiency.
        inter_node_efficiency: fraction of the node's nominal network bandwidth achieved by
            collectives and pipeline transfers between nodes.
    """

    eta_max: float
    work_half_gflop: float
    inter_node_efficiency: float

    def __post_init__(self) -> None:
        if not 0 < self.eta_max <= 1.5:
            raise ConfigError(f"eta_max={self.eta_max} must be in (0, 1.5]")
        if self.work_half_gflop < 0:
            raise ConfigError("work_half_gflop must be >= 0")
        if not 0 < self.inter_node_efficiency <= 2:
            raise ConfigError("inter_node_efficiency must be in (0, 2]")

    def efficiency(self, work_gflop: float) -> float:
        """Compute efficiency at a given per-GPU work per microbatch-stage (GFLOP)."""
        return self.eta_max * work_gflop / (work_gflop + self.work_half_gflop)


@dataclass(frozen=True)
class Calibration:
    """Constants of one framework.

    Attributes:
        framework: framework name.
        gpus: per canonical GPU name.
        default_gpu: used for GPU types absent from ``gpus``.
        intra_link_efficiency: fraction of nominal intra-node link bandwidth achieved.
        family_efficiency: compute-efficiency factor per model family (1.0 when absent).
        family_work_scale: divides a family's per-GPU work before the efficiency curve (1.0 when
            absent): > 1 means the family needs more work per GPU to run efficiently
            (convolutions with few images per GPU).
        activation_traffic: memory-bound elementwise work (normalisation, softmax, dropout,
            activation functions) as passes over the stored activation bytes per training
            step, priced at HBM bandwidth; its share of a layer's time falls as 1/h.
        collective_latency_s: latency per collective or transfer, seconds.
        iteration_overhead_s: constant cost per iteration, seconds.
        wave_elements: output elements per GPU of one full wave of a kernel priced by occupancy
            (convolutions): such a kernel costs at least one wave, i.e. ``max(E, wave)`` output
            elements with E its own (``docs/estimator.md``, "Convolutions"); 0 = no floor.
    """

    framework: str
    gpus: Mapping[str, GPUCalibration]
    default_gpu: GPUCalibration
    intra_link_efficiency: float = 0.5
    family_efficiency: Mapping[str, float] = field(default_factory=dict)
    family_work_scale: Mapping[str, float] = field(default_factory=dict)
    activation_traffic: float = 0.0
    collective_latency_s: float = 0.0
    iteration_overhead_s: float = 0.0
    wave_elements: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.intra_link_efficiency <= 2:
            raise ConfigError("intra_link_efficiency must be in (0, 2]")
        if (
            self.collective_latency_s < 0
            or self.iteration_overhead_s < 0
            or (self.activation_traffic < 0)
            or self.wave_elements < 0
        ):
            raise ConfigError("latency, overhead, activation traffic and wave must be >= 0")

    def __hash__(self) -> int:
        return hash(
            (
                self.framework,
                tuple(sorted(self.gpus.items())),
                self.default_gpu,
                self.intra_link_efficiency,
                tuple(sorted(self.family_efficiency.items())),
                tuple(sorted(self.family_work_scale.items())),
                self.activation_traffic,
                self.collective_latency_s,
                self.iteration_overhead_s,
                self.wave_elements,
            )
        )

    def gpu(self, name: str) -> GPUCalibration:
        """Constants of a GPU type (``default_gpu`` when it has none of its own)."""
        return self.gpus.get(name, self.default_gpu)

    def family(self, family: str) -> float:
        """Efficiency factor of a model family."""
        return self.family_efficiency.get(family, 1.0)

    def work_scale(self, family: str) -> float:
        """Work scale of a model family."""
        return self.family_work_scale.get(family, 1.0)

    def to_dict(self) -> dict[str, Any]:
        """Plain mapping for YAML."""

        def g(c: GPUCalibration) -> dict[str, float]:
            return {
                "eta_max": round(c.eta_max, 6),
                "work_half_gflop": round(c.work_half_gflop, 6),
                "inter_node_efficiency": round(c.inter_node_efficiency, 6),
            }

        return {
            "gpus": {k: g(v) for k, v in self.gpus.items()},
            "default_gpu": g(self.default_gpu),
            "intra_link_efficiency": round(self.intra_link_efficiency, 6),
            "family_efficiency": {k: round(v, 6) for k, v in self.family_efficiency.items()},
            "family_work_scale": {k: round(v, 6) for k, v in self.family_work_scale.items()},
            "activation_traffic": round(self.activation_traffic, 6),
            "collective_latency_s": round(self.collective_latency_s, 9),
            "iteration_overhead_s": round(self.iteration_overhead_s, 6),
            "wave_elements": round(self.wave_elements, 1),
        }


def _gpu_cal(entry: Mapping[str, Any]) -> GPUCalibration:
    return GPUCalibration(
        eta_max=float(entry["eta_max"]),
        work_half_gflop=float(entry["work_half_gflop"]),
        inter_node_efficiency=float(entry["inter_node_efficiency"]),
    )


def parse_calibration(framework: str, entry: Mapping[str, Any]) -> Calibration:
    """Build a framework's calibration from its YAML mapping."""
    return Calibration(
        framework=framework,
        gpus={str(k): _gpu_cal(v) for k, v in (entry.get("gpus") or {}).items()},
        default_gpu=_gpu_cal(entry["default_gpu"]),
        intra_link_efficiency=float(entry.get("intra_link_efficiency", 0.5)),
        family_efficiency={
            str(k): float(v) for k, v in (entry.get("family_efficiency") or {}).items()
        },
        family_work_scale={
            str(k): float(v) for k, v in (entry.get("family_work_scale") or {}).items()
        },
        activation_traffic=float(entry.get("activation_traffic", 0.0)),
        collective_latency_s=float(entry.get("collective_latency_s", 0.0)),
        iteration_overhead_s=float(entry.get("iteration_overhead_s", 0.0)),
        wave_elements=float(entry.get("wave_elements", 0.0)),
    )


@functools.cache
def load_calibrations(path: str | None = None) -> dict[str, Calibration]:
    """Load every framework's calibration (the packaged file by default)."""
    if path is None:
        text = (resources.files("crius_gym") / "data" / "calibration.yaml").read_text()
        where = "crius_gym/data/calibration.yaml"
        raw = load_yaml(text, where)
    else:
        raw, where = load_yaml_file(path), path
    try:
        return {
            str(name): parse_calibration(str(name), entry)
            for name, entry in raw["frameworks"].items()
        }
    except (yaml.YAMLError, KeyError, TypeError, ValueError, AttributeError, ConfigError) as exc:
        raise InputFileError(where, f"invalid calibration: {exc}") from exc


def get_calibration(framework: str, path: str | None = None) -> Calibration:
    """Return the calibration of ``framework``.

    A framework profile that runs another framework's kernels (its ``calibration`` field, e.g.
    Megatron-DeepSpeed → ``megatron``) gets that framework's constants.
    """
    cals = load_calibrations(path)
    profiles = load_frameworks()
    key = profiles[framework].calibration if framework in profiles else framework
    try:
        return cals[key]
    except KeyError:
        raise UnknownNameError("calibrated framework", key, cals) from None
