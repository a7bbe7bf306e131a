"""Saved policies that cannot be run are refused before any work, with the file and the reason
(issue 14, item 5): empty, random or truncated zips, broken or partial metadata, and a zip whose
spaces are not the ones its metadata describes, and a malformed deployment block."""

import shutil
from pathlib import Path

import pytest
import yaml
from sb3_contrib import MaskablePPO

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.rl.deviation import recorded_deployment
from crius_gym.rl.saved import PolicyCompatibilityError, load_policy, write_metadata

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference_policy"


@pytest.fixture(scope="module")
def env():
    return CriusEnv("tiny")


def run_folder(tmp_path, env, payload: bytes) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    write_metadata(d, env, {"run": "x"})
    (d / "model.zip").write_bytes(payload)
    return d / "model.zip"


@pytest.mark.parametrize(
    "payload", [b"", b"\x00not a zip at all\xff" * 10, b"PK\x03\x04truncated"], ids=str
)
def test_unreadable_zip_is_refused(tmp_path, env, payload):
    path = run_folder(tmp_path, env, payload)
    with pytest.raises(PolicyCompatibilityError, match=r"not a readable saved policy") as err:
        load_policy(path, env)
    assert str(path) in str(err.value)


def test_truncated_reference_policy_is_refused(tmp_path, env):
    src = REFERENCE / "best_model.zip"
    if not src.is_file():
        pytest.skip(f"{src} absent")
    data = src.read_bytes()
    path = run_folder(tmp_path, env, data[: len(data) // 2])
    with pytest.raises(PolicyCompatibilityError, match=r"not a readable saved policy"):
        load_policy(path, env)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("env_version: [unclosed\n", "metadata.yaml, line 2: not readable YAML"),
        ("- a list\n", "metadata.yaml: expected a mapping"),
        ("run: x\nenv_version: 4\nenv_config: {}\n", "incomplete metadata, missing"),
        ("run: x\nenv_version: 4\n", "field .env_config.: missing"),
    ],
)
def test_broken_metadata_is_refused(tmp_path, env, text, match):
    src = REFERENCE / "best_model.zip"
    if not src.is_file():
        pytest.skip(f"{src} absent")
    d = tmp_path / "run"
    d.mkdir()
    shutil.copy(src, d / "best_model.zip")
    (d / "metadata.yaml").write_text(text)
    with pytest.raises(PolicyCompatibilityError, match=match):
        load_policy(d / "best_model.zip", env)


def test_zip_that_does_not_match_its_metadata_is_refused(tmp_path, env):
    other = CriusEnv("tiny", {"window_jobs": 4})
    MaskablePPO("MultiInputPolicy", other, n_steps=8, batch_size=8).save(tmp_path / "m.zip")
    path = run_folder(tmp_path, env, (tmp_path / "m.zip").read_bytes())
    with pytest.raises(PolicyCompatibilityError, match=r"do not match its metadata.yaml"):
        load_policy(path, env)


def test_reference_policy_loads(env):
    src = REFERENCE / "best_model.zip"
    if not src.is_file():
        pytest.skip(f"{src} absent")
    model, meta = load_policy(src, env)
    assert meta["env_namespace"] == "crius_gym"
    assert model.action_space == env.action_space
    assert yaml.safe_load((REFERENCE / "metadata.yaml").read_text())["spaces"] == meta["spaces"]


@pytest.mark.parametrize(
    ("deployment", "match"),
    [
        ({"guide_margin": "wide"}, r"deployment: guide_margin 'wide' is not a number"),
        ({"guide_margin": -1}, r"deployment: guide_margin must be >= 0"),
        ({"guide_margin": 0.5, "max_waiting": "many"}, r"deployment: deployment.max_waiting"),
        ({"guide_margin": 0.5, "max_waiting": -2}, r"deployment: deployment.max_waiting"),
        (
            {"guide_margin": 0.5, "max_waiting": 2, "max_running": "all"},
            r"deployment: deployment.max_running",
        ),
    ],
)
def test_malformed_deployment_is_refused_naming_the_file(tmp_path, deployment, match):
    d = tmp_path / "run"
    d.mkdir()
    meta = yaml.safe_load((REFERENCE / "metadata.yaml").read_text())
    meta["deployment"] = deployment
    (d / "metadata.yaml").write_text(yaml.safe_dump(meta))
    with pytest.raises(PolicyCompatibilityError, match=match) as err:
        recorded_deployment(d / "best_model.zip")
    assert str(d / "metadata.yaml") in str(err.value)


def test_reference_policy_records_its_deployment():
    margin, envelope = recorded_deployment(REFERENCE / "best_model.zip")
    assert margin >= 0 and envelope is not None and envelope.waiting > 0
    assert envelope.running is not None and envelope.running > 0
