"""Workloads: the model catalogue, jobs, trace readers and synthetic generators."""

from crius_gym.workload.models import (
    ModelCatalog,
    ModelSpec,
    MoESpec,
    TransformerSpec,
    WideResNetSpec,
    load_model_catalog,
)

__all__ = [
    "MoESpec",
    "ModelCatalog",
    "ModelSpec",
    "TransformerSpec",
    "WideResNetSpec",
    "load_model_catalog",
]
