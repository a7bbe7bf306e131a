"""Saved policies: metadata written beside the model, and loading with compatibility checks."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import yaml
from sb3_contrib import MaskablePPO

from crius_gym.atomic import atomic_write_text
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.errors import CriusGymError, InputFileError
from crius_gym.registration import COMPATIBLE_VERSIONS, ENV_VERSION, NAMESPACE, env_id, scenario_of
from crius_gym.yamlfile import load_yaml_file

METADATA_FILE = "metadata.yaml"


REQUIRED_METADATA = ("env_namespace", "env_version", "spaces")


class PolicyCompatibilityError(CriusGymError):
    """A saved policy does not fit the environment it is asked to run in."""


def space_signature(env: CriusEnv) -> dict[str, Any]:
    """What a policy's input and output depend on: observation shapes and the action count."""
    return {
        "observation": {k: list(v.shape or ()) for k, v in env.encoder.space.spaces.items()},
        "actions": env.config.num_actions,
    }


def write_metadata(policy_dir: Path, env: CriusEnv, extra: dict[str, Any]) -> None:
    """Write ``metadata.yaml`` (env id and version, spaces, plus ``extra``) atomically."""
    meta = {
        "env_id": env_id(env.scenario.name),
        "env_namespace": NAMESPACE,
        "env_version": ENV_VERSION,
        "scenario": env.scenario.name,
        "env_config": {k: v for k, v in env.config.__dict__.items()},
        "spaces": space_signature(env),
        **extra,
    }
    atomic_write_text(policy_dir / METADATA_FILE, yaml.safe_dump(meta, sort_keys=False))


def policy_file(path: str | Path) -> Path:
    """The model a path names: a run folder's ``best_model.zip`` (else ``model.zip``), or a file."""
    p = Path(path)
    if p.is_dir():
        best = p / "best_model.zip"
        return best if best.is_file() else p / "model.zip"
    return p


def metadata_path(model_path: Path) -> Path:
    """The ``metadata.yaml`` that describes a saved model (a checkpoint's is its run's)."""
    dirs = [model_path.parent]
    if model_path.parent.name == "checkpoints":  # a checkpoint belongs to the run above it
        dirs.append(model_path.parent.parent)
    for d in dirs:
        if (d / METADATA_FILE).is_file():
            return d / METADATA_FILE
    return model_path.parent / METADATA_FILE


def read_metadata(model_path: Path) -> dict[str, Any]:
    """The metadata of a saved model (``metadata.yaml`` in its run folder)."""
    f = metadata_path(model_path)
    if not f.is_file():
        raise PolicyCompatibilityError(
            f"{model_path}: no {METADATA_FILE} beside it; was it saved by experiments/train_ppo.py?"
        )
    try:
        data = load_yaml_file(f)
    except InputFileError as exc:
        line = f", line {exc.row}" if exc.row is not None else ""
        raise PolicyCompatibilityError(f"{f}{line}: not readable YAML ({exc.message})") from exc
    if not isinstance(data, dict):
        raise PolicyCompatibilityError(f"{f}: expected a mapping, got {type(data).__name__}")
    check_env_config(f, data.get("env_config"))
    return data


def check_env_config(path: Path, value: Any) -> None:
    """``env_config`` must be a mapping of :class:`EnvConfig` fields (the env it was trained in).

    Raises:
        PolicyCompatibilityError: naming the file, the field and what is wrong with it.
    """
    if value is None:
        raise PolicyCompatibilityError(
            f"{path}, field 'env_config': missing (the env settings the policy was trained with; "
            "train_ppo.py writes it; {} means the defaults)"
        )
    if not isinstance(value, dict):
        raise PolicyCompatibilityError(
            f"{path}, field 'env_config': expected a mapping, got {type(value).__name__}"
        )
    known = {f.name for f in dataclasses.fields(EnvConfig)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise PolicyCompatibilityError(
            f"{path}, field 'env_config.{unknown[0]}': not an env setting; known: "
            f"{', '.join(sorted(known))}"
        )


def plain_metadata(model_path: Path, gym_id: str) -> dict[str, Any]:
    """What a model saved by plain SB3 / sb3-contrib (no ``metadata.yaml``) is taken to be.

    SB3's zip records the spaces but not the env, so the env is ``gym_id`` (a registered
    ``crius_gym/<Scenario>-v<N>`` id, its default settings): the version comes from the id, the
    spaces are checked against the model's own when it is loaded (:func:`load_policy`).

    Raises:
        PolicyCompatibilityError: ``gym_id`` is not a registered crius_gym id.
    """
    import gymnasium as gym

    try:
        scenario = scenario_of(gym_id)
    except (gym.error.Error, KeyError) as exc:
        raise PolicyCompatibilityError(
            f"{model_path}: saved without {METADATA_FILE} (plain SB3?), and --env-id {gym_id!r} "
            f"is not a registered crius_gym id ({exc})"
        ) from None
    version = int(gym_id.rsplit("-v", 1)[1]) if "-v" in gym_id else None
    return {
        "env_id": gym_id,
        "env_namespace": gym_id.split("/", 1)[0] if "/" in gym_id else None,
        "env_version": version,
        "scenario": scenario,
        "env_config": {},
        "plain": True,
        "policy": "plain SB3",
        "command": f"(no {METADATA_FILE}: a plain SB3 model, taken as trained on {gym_id})",
    }


def model_metadata(model_path: Path, gym_id: str | None = None) -> dict[str, Any]:
    """Its ``metadata.yaml``, else (with ``gym_id``) :func:`plain_metadata`.

    Raises:
        PolicyCompatibilityError: no ``metadata.yaml`` and no ``gym_id``, or unreadable.
    """
    if gym_id is not None and not metadata_path(model_path).is_file():
        return plain_metadata(model_path, gym_id)
    return read_metadata(model_path)


def load_policy(
    model_path: str | Path, env: CriusEnv, gym_id: str | None = None
) -> tuple[MaskablePPO, dict[str, Any]]:
    """Load a saved MaskablePPO after checking it was trained for a compatible env.

    A policy runs on any scenario (observations do not depend on the cluster), but only with
    a compatible env version (``COMPATIBLE_VERSIONS``) and the same observation and action
    spaces. A model without ``metadata.yaml`` (plain SB3) loads when ``gym_id`` says which env
    it was trained on (:func:`plain_metadata`).

    Raises:
        PolicyCompatibilityError: naming the file and what differs.
    """
    path = Path(model_path)
    if not path.is_file():
        raise PolicyCompatibilityError(f"{path}: no such policy file")
    meta = model_metadata(path, gym_id)
    if meta.get("plain"):
        return _load_plain(path, env, meta), meta
    missing = [k for k in REQUIRED_METADATA if k not in meta]
    if missing:
        raise PolicyCompatibilityError(
            f"{path.parent / METADATA_FILE if (path.parent / METADATA_FILE).is_file() else path}: "
            f"incomplete metadata, missing {missing} (written by train_ppo.py at the start and "
            "the end of a run)"
        )
    version = meta.get("env_version")
    if meta.get("env_namespace") != NAMESPACE or version not in COMPATIBLE_VERSIONS:
        raise PolicyCompatibilityError(
            f"{path}: saved for env {meta.get('env_id')!r} (namespace "
            f"{meta.get('env_namespace')!r}, version {meta.get('env_version')!r}); this env is "
            f"{NAMESPACE} version {ENV_VERSION} (runs policies of versions "
            f"{', '.join(map(str, COMPATIBLE_VERSIONS))})"
        )
    want = space_signature(env)
    have = meta.get("spaces")
    if have != want:
        raise PolicyCompatibilityError(
            f"{path}: trained with observation/action spaces {have}, but the env (scenario "
            f"{env.scenario.name}, its env settings) has {want}; evaluate with the settings of "
            f"metadata.yaml's env_config"
        )
    try:
        model = MaskablePPO.load(path, device="cpu")
    except Exception as exc:  # zipfile, pickle, torch: all mean "not a readable policy"
        raise PolicyCompatibilityError(
            f"{path}: not a readable saved policy ({type(exc).__name__}: {exc})"
        ) from exc
    # The metadata could describe another model than the zip beside it (a copied file).
    if model.observation_space != env.observation_space or model.action_space != env.action_space:
        raise PolicyCompatibilityError(
            f"{path}: the model's spaces do not match its {METADATA_FILE} (the zip belongs to "
            "another run or env settings)"
        )
    return model, meta


def _load_plain(path: Path, env: CriusEnv, meta: dict[str, Any]) -> MaskablePPO:
    """A plain SB3 model: its version from its env id, its spaces from the zip itself."""
    if meta.get("env_namespace") != NAMESPACE or meta.get("env_version") not in COMPATIBLE_VERSIONS:
        raise PolicyCompatibilityError(
            f"{path}: trained on {meta.get('env_id')!r}; this env is {NAMESPACE} version "
            f"{ENV_VERSION} (runs policies of versions {', '.join(map(str, COMPATIBLE_VERSIONS))})"
        )
    try:
        model = MaskablePPO.load(path, device="cpu")
    except Exception as exc:  # zipfile, pickle, torch: all mean "not a readable policy"
        raise PolicyCompatibilityError(
            f"{path}: not a readable MaskablePPO ({type(exc).__name__}: {exc})"
        ) from exc
    if model.observation_space != env.observation_space or model.action_space != env.action_space:
        raise PolicyCompatibilityError(
            f"{path}: the model's spaces ({model.observation_space}, {model.action_space}) are "
            f"not those of {meta.get('env_id')} with default settings "
            f"({env.observation_space}, {env.action_space}); pass the id it was trained on "
            "with --env-id"
        )
    return model
