"""The JSON Schema of scenario files (``envs/*.yaml``), for editors.

Generated from the config dataclasses the loader builds (:func:`crius_gym.schema.
dataclass_schema`) plus the keys the loader reads itself; ``python experiments/write_schemas.py``
writes it to ``envs/scenario.schema.json``. The loader (:mod:`crius_gym.scenarios.loader`) stays
the authority: it also checks names against the catalogues, ranges and cross-field rules, and its
errors name the file and key.
"""

from __future__ import annotations

from typing import Any

from crius_gym.hardware.cluster import NODE_GROUP_KEYS
from crius_gym.perf.tuner import TunerConfig
from crius_gym.scenarios.spec import GROUND_TRUTHS, SplitSpec
from crius_gym.schema import dataclass_schema
from crius_gym.sim.simulator import SimConfig
from crius_gym.workload.synthetic import SyntheticConfig

_NODE_GROUP: dict[str, Any] = {
    "type": "object",
    "description": "A node group: nodes of one GPU type (hardware.cluster.build_cluster).",
    "required": ["gpu", "nodes"],
    "additionalProperties": False,
    "properties": {
        "gpu": {"type": "string", "description": "GPU type: catalogue name or alias (a100 …)."},
        "nodes": {"type": "integer", "minimum": 1, "description": "number of nodes."},
        "gpus_per_node": {
            "type": "integer",
            "minimum": 1,
            "description": "GPUs in each node (default: the GPU's usual node size).",
        },
        "intra_link": {"type": "string", "description": "GPU-to-GPU link inside a node."},
        "inter_link": {
            "type": "string",
            "description": "network between nodes (default: ib-hdr).",
        },
        "nics_per_node": {
            "type": "integer",
            "minimum": 1,
            "description": "NICs per node on inter_link (default: 1).",
        },
    },
}
assert set(_NODE_GROUP["properties"]) == NODE_GROUP_KEYS  # one list of keys, checked


def _section(cls: type, defs: dict[str, Any]) -> dict[str, Any]:
    """A dataclass's schema, its nested definitions moved to the root's ``$defs``."""
    schema = dataclass_schema(cls)
    schema.pop("title", None)
    defs.update(schema.pop("$defs", {}))
    return schema


def scenario_file_schema() -> dict[str, Any]:
    """The schema of a scenario file: a plain scenario or a mixture (``mix``)."""
    defs: dict[str, Any] = {}
    synthetic = _section(SyntheticConfig, defs)
    synthetic["properties"]["preset"] = {
        "enum": ["philly", "helios", "pai"],
        "description": "start from a named workload preset instead of the Philly defaults.",
    }
    policy_entry = {
        "anyOf": [
            {"type": "string", "description": "a registered policy name."},
            {
                "type": "object",
                "required": ["policy"],
                "properties": {"policy": {"type": "string"}},
                "additionalProperties": True,
                "description": "a registered policy with option overrides.",
            },
        ]
    }
    plain: dict[str, Any] = {
        "name": {"type": "string", "description": "identifier (default: the file stem)."},
        "description": {"type": "string"},
        "cluster": {"type": "array", "minItems": 1, "items": _NODE_GROUP},
        "framework": {
            "type": "string",
            "description": "estimator framework profile and calibration (default: alpa).",
        },
        "tuner": _section(TunerConfig, defs),
        "sim": _section(SimConfig, defs),
        "ground_truth": {
            "enum": list(GROUND_TRUTHS),
            "description": "real iteration times (default: estimator).",
        },
        "workload": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "trace": {
                    "type": "string",
                    "description": "the scenario's own workload: an Arena trace name or a trace "
                    "file path in any readable format (relative to this file).",
                },
                "iteration_divisor": {
                    "type": "integer",
                    "minimum": 1,
                    "description": "floor-divide an Arena trace's num_iteration by this.",
                },
                "load": {
                    "type": "number",
                    "exclusiveMinimum": 0,
                    "description": "offered load of synthetic traces (sets their arrival rate).",
                },
                "synthetic": synthetic,
            },
        },
        "splits": _section(SplitSpec, defs),
        "policies": {
            "type": "object",
            "additionalProperties": policy_entry,
            "description": "what a policy name means in this scenario.",
        },
    }
    component = {
        "type": "object",
        "required": ["scenario"],
        "additionalProperties": False,
        "properties": {
            "scenario": {
                "anyOf": [
                    {"type": "string", "description": "a scenario file by name."},
                    {"type": "object", "description": "an inline scenario (cluster, workload …)."},
                ]
            },
            "weight": {"type": "number", "exclusiveMinimum": 0},
        },
    }
    mixture: dict[str, Any] = {
        "name": plain["name"],
        "description": plain["description"],
        "splits": plain["splits"],
        "policies": plain["policies"],
        "mix": {"type": "array", "minItems": 1, "items": component},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "crius_gym scenario file (envs/*.yaml)",
        "description": "A cluster, its workload, simulator settings and splits; or a mixture of "
        "scenarios (mix). Validated on load by crius_gym.scenarios.loader.",
        "anyOf": [
            {
                "type": "object",
                "required": ["cluster"],
                "additionalProperties": False,
                "properties": plain,
            },
            {
                "type": "object",
                "required": ["mix"],
                "additionalProperties": False,
                "properties": mixture,
            },
        ],
        "$defs": defs,
    }
