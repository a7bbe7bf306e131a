"""The JSON Schema of PPO hyperparameter files (``agents/ppo.yaml``), for editors.

Every block (``default`` and one per scenario) is a partial :class:`~crius_gym.rl.ppo.
PPOHyperparams`; ``python experiments/write_schemas.py`` writes the schema to
``agents/ppo.schema.json``. The loader (:func:`crius_gym.rl.ppo.resolve_hyperparams`) stays the
authority on values.
"""

from __future__ import annotations

from typing import Any

from crius_gym.rl.ppo import PPOHyperparams
from crius_gym.schema import dataclass_schema


def hyperparameter_file_schema() -> dict[str, Any]:
    """The schema of a hyperparameter file: blocks of PPO settings keyed by scenario name."""
    block = dataclass_schema(PPOHyperparams)
    defs = block.pop("$defs", {})
    block.pop("title", None)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "crius_gym PPO hyperparameters (agents/*.yaml)",
        "description": "'default' applies everywhere; a block named after a scenario overrides "
        "it; train_ppo.py --set key=value overrides both.",
        "type": "object",
        "additionalProperties": block,
        "$defs": defs,
    }
