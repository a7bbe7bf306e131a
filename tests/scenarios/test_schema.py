"""The config files' JSON Schemas: fresh, valid for every bundled file, and strict."""

from __future__ import annotations

import json

import pytest
import yaml

from crius_gym.errors import InputFileError
from crius_gym.scenarios import parse_scenario
from crius_gym.schema import attribute_docs
from crius_gym.sim.simulator import SimConfig
from tests.conftest import REPO

jsonschema = pytest.importorskip("jsonschema", reason="the dev extra's jsonschema")
pytest.importorskip("pydantic", reason="the dev extra's pydantic generates the schemas")

SCENARIO_SCHEMA = REPO / "envs" / "scenario.schema.json"
PPO_SCHEMA = REPO / "agents" / "ppo.schema.json"


def validator(path):
    return jsonschema.Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))


def test_committed_schemas_are_the_generated_ones():
    import importlib.util

    spec = importlib.util.spec_from_file_location("ws", REPO / "experiments" / "write_schemas.py")
    ws = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ws)
    for path, schema in ws.schemas().items():
        assert path.read_text(encoding="utf-8") == ws.render(schema), (
            f"{path.name} is stale: python experiments/write_schemas.py"
        )


@pytest.mark.parametrize("path", sorted((REPO / "envs").glob("*.yaml")), ids=lambda p: p.name)
def test_every_scenario_file_validates_and_names_its_schema(path):
    assert (
        path.read_text().splitlines()[0] == "# yaml-language-server: $schema=scenario.schema.json"
    )
    errors = list(validator(SCENARIO_SCHEMA).iter_errors(yaml.safe_load(path.read_text())))
    assert errors == []


def test_the_hyperparameter_file_validates():
    path = REPO / "agents" / "ppo.yaml"
    assert path.read_text().splitlines()[0] == "# yaml-language-server: $schema=ppo.schema.json"
    assert list(validator(PPO_SCHEMA).iter_errors(yaml.safe_load(path.read_text()))) == []
    bad = {"default": {"n_epochs": "four", "n_stepz": 8}}
    messages = sorted(e.message for e in validator(PPO_SCHEMA).iter_errors(bad))
    assert any("'four' is not of type 'integer'" in m for m in messages)
    assert any("'n_stepz' was unexpected" in m for m in messages)


@pytest.mark.parametrize(
    ("change", "schema_says", "loader_field"),
    [
        ({"tuner": {"max_gpu": 8}}, "'max_gpu' was unexpected", "tuner"),
        ({"splits": {"seed": "zero"}}, "'zero' is not of type 'integer'", "splits"),
        ({"ground_truth": "oracle"}, "'oracle' is not one of", "ground_truth"),
        ({"workload": {"lode": 0.5}}, "'lode' was unexpected", "workload.lode"),
    ],
)
def test_a_broken_file_is_refused_by_the_schema_and_the_loader(change, schema_says, loader_field):
    raw = {"cluster": [{"gpu": "a100", "nodes": 1, "gpus_per_node": 4}], **change}
    errors = list(validator(SCENARIO_SCHEMA).iter_errors(raw))
    text = " ".join(e.message for e in errors) + " ".join(
        c.message for e in errors for c in (e.context or [])
    )
    assert schema_says in text
    with pytest.raises(InputFileError) as info:
        parse_scenario(raw, "broken.yaml", "broken")
    assert "broken.yaml" in str(info.value) and loader_field in str(info.value)


def test_property_descriptions_come_from_the_docstrings():
    docs = attribute_docs(SimConfig)
    assert docs["checkpoint_restore_s"].startswith("pause when a job with progress restarts")
    schema = json.loads(SCENARIO_SCHEMA.read_text())
    plain = schema["anyOf"][0]["properties"]
    assert (
        plain["sim"]["properties"]["checkpoint_restore_s"]["description"]
        == (docs["checkpoint_restore_s"])
    )
