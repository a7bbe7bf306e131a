"""Scenario files: ``envs/<name>.yaml`` parsed and validated into a :class:`Scenario`.

A scenario file (``envs/<name>.yaml``) is validated on load; every error names the file and the
key.  Keys::

    name: hetero-64                 # identifier (defaults to the file stem)
    description: free text
    cluster:                        # node groups (crius_gym.hardware.cluster.build_cluster)
      - {gpu: a100, nodes: 4, gpus_per_node: 4, inter_link: ib-hdr, nics_per_node: 1}
    framework: alpa                 # estimator framework profile and calibration
    tuner: {max_gpus: 16, dominance_threshold: 0.05, ...}     # crius_gym.perf.tuner.TunerConfig
    sim:                                                       # crius_gym.sim.simulator.SimConfig
      checkpoint_restore_s: 30
      artifact_compat: {rounds: true, progress: revalue}  # crius_gym.sim.artifact_compat
    ground_truth: estimator         # or "measured" (Arena table where measured), or
                                    # "artifact-table" (the artifact's oracle table, seen by the
                                    # schedulers too)
    workload:
      trace: testbed                # optional: an Arena trace name or a CSV path (own workload)
      iteration_divisor: 5          # optional: floor-divide the trace's iterations (default: the
                                    # artifact's convention, 5 for simulate_trace_* files, else 1)
      load: 0.7                     # offered load of synthetic traces (sets their arrival rate)
      synthetic: {num_jobs: 120}    # crius_gym.workload.synthetic.SyntheticConfig overrides
                                    # (of the Philly defaults, or of a named preset:
                                    # {preset: helios} or {preset: pai})
    splits: {seed: 0, train_episode_jobs: 60, validation_traces: 4, test_traces: 8}
    policies:                       # optional: what a policy name means in this scenario
      crius: crius-artifact         # a registered policy ...
      fcfs: {policy: fcfs, per_type_fifo: true}   # ... or one with option overrides

A **mixture** trains an agent on several scenarios at once (``envs/mix.yaml``): it has ``name``,
``description``, ``splits`` and a ``mix`` list instead of a cluster and a workload::

    mix:
      - {scenario: hetero-64, weight: 1}          # a scenario file by name ...
      - {weight: 2, scenario: {cluster: [...], workload: {...}}}   # ... or inline

Training episode ``i`` of a mixture is training trace ``i`` of one component, drawn by weight
from a stream of its own (:meth:`Scenario.mix_component`); every other use of the mixture (its
cluster, held-out traces) is its first component's.

Synthetic traces of the three splits come from disjoint random streams (``split_rng``), so no
training episode ever replays a validation or test trace.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from crius_gym.bundled import list_scenarios, scenario_dir
from crius_gym.errors import ConfigError, InputFileError, UnknownNameError
from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.calibration import get_calibration
from crius_gym.perf.framework import get_framework
from crius_gym.perf.tuner import TunerConfig
from crius_gym.scenarios.spec import (
    GROUND_TRUTHS,
    PolicySpec,
    Scenario,
    SplitSpec,
    WorkloadSpec,
)
from crius_gym.sim.artifact_compat import ArtifactCompat
from crius_gym.sim.simulator import SimConfig
from crius_gym.workload.models import load_model_catalog
from crius_gym.workload.synthetic import (
    SyntheticConfig,
    synthetic_preset,
)
from crius_gym.yamlfile import load_yaml_file

_TOP_KEYS = {
    "mix",
    "policies",
    "name",
    "description",
    "cluster",
    "framework",
    "tuner",
    "sim",
    "ground_truth",
    "workload",
    "splits",
}


def _section(raw: Mapping[str, Any], key: str, path: str) -> dict[str, Any]:
    value = raw.get(key) or {}
    if not isinstance(value, Mapping):
        raise InputFileError(path, "must be a mapping", field=key)
    return dict(value)


def _tuples(value: Any) -> Any:
    """YAML lists → tuples, recursively (config dataclasses hold immutable tuples)."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def _build(cls: type[Any], values: Mapping[str, Any], path: str, key: str) -> Any:
    known = {f.name for f in dataclasses.fields(cls) if not f.name.startswith("_")}
    for k in values:
        if k not in known:
            raise InputFileError(
                path, f"unknown key; known: {', '.join(sorted(known))}", field=f"{key}.{k}"
            )
    try:
        return cls(**{k: _tuples(v) for k, v in values.items()})
    except (ConfigError, TypeError, ValueError) as exc:
        raise InputFileError(path, str(exc), field=key) from exc


def _trace_ref(ref: str, path: str) -> str:
    """Where ``workload.trace`` points.

    A named public trace as it stands; a relative file path resolved against the scenario
    file's folder (not the working directory).
    """
    from crius_gym import datasets

    if ref in datasets.ARENA_TRACES or Path(ref).is_absolute() or not Path(path).is_file():
        return ref
    return str((Path(path).parent / ref).resolve())


def _synthetic(raw: Any, path: str) -> SyntheticConfig:
    """``workload.synthetic``: overrides of the Philly defaults, or of a named ``preset``."""
    where = "workload.synthetic"
    if not isinstance(raw, Mapping):
        raise InputFileError(path, "must be a mapping", field=where)
    values = dict(raw)
    name = values.pop("preset", None)
    if name is None:
        cfg: SyntheticConfig = _build(SyntheticConfig, values, path, where)
    else:
        try:
            base = synthetic_preset(str(name))
            cfg = SyntheticConfig.from_mapping({**base.to_dict(), **values})
        except UnknownNameError as exc:
            raise InputFileError(path, str(exc), field=f"{where}.preset") from exc
        except ConfigError as exc:
            raise InputFileError(path, str(exc), field=where) from exc
    # Checked here, where the file and key are known (the generator would find out later).
    catalog = load_model_catalog()
    for model, _ in cfg.model_mix:
        try:
            catalog.get(model)
        except UnknownNameError as exc:
            raise InputFileError(path, str(exc), field=f"{where}.model_mix") from exc
    return cfg


def _parse_mix(raw: Mapping[str, Any], path: str, default_name: str) -> Scenario:
    """A mixture: components (named or inline) with weights, its own name and splits."""
    for k in raw:
        if k not in ("name", "description", "mix", "splits"):
            raise InputFileError(
                path, "unknown key in a mixture; known: description, mix, name, splits", field=k
            )
    entries = raw["mix"]
    if not isinstance(entries, list) or not entries:
        raise InputFileError(path, "needs a non-empty list of components", field="mix")
    comps: list[tuple[Scenario, float]] = []
    for i, e in enumerate(entries):
        where = f"mix[{i}]"
        if not isinstance(e, Mapping) or "scenario" not in e:
            raise InputFileError(path, "needs {scenario: NAME or mapping, weight: w}", field=where)
        unknown = set(e) - {"scenario", "weight"}
        if unknown:
            raise InputFileError(path, f"unknown key {sorted(unknown)[0]!r}", field=where)
        try:
            weight = float(e.get("weight", 1.0))
        except (TypeError, ValueError):
            weight = -1.0
        if not weight > 0:
            raise InputFileError(path, "weight must be a positive number", field=f"{where}.weight")
        ref = e["scenario"]
        if isinstance(ref, str):
            try:
                comp = load_scenario(ref)
            except UnknownNameError as exc:
                raise InputFileError(path, str(exc), field=f"{where}.scenario") from exc
        elif isinstance(ref, Mapping):
            name = str(ref.get("name", f"{default_name}-{i}"))
            comp = parse_scenario({**ref, "name": name}, path, name)
        else:
            raise InputFileError(path, "must be a name or a mapping", field=f"{where}.scenario")
        if comp.mix:
            raise InputFileError(path, "a component cannot be a mixture", field=where)
        comps.append((comp, weight))
    first = comps[0][0]
    return dataclasses.replace(
        first,
        name=str(raw.get("name", default_name)),
        description=str(raw.get("description", "")).strip(),
        splits=_build(SplitSpec, _section(raw, "splits", path), path, "splits"),
        policies=(),
        mix=tuple(comps),
        path=path,
        _memo={},
    )


def parse_scenario(raw: Any, path: str, default_name: str) -> Scenario:
    """Validate a parsed scenario mapping.

    Raises:
        InputFileError: naming the file and the key at fault.
    """
    if not isinstance(raw, Mapping):
        raise InputFileError(path, "a scenario file must be a YAML mapping")
    for k in raw:
        if k not in _TOP_KEYS:
            raise InputFileError(
                path, f"unknown key; known: {', '.join(sorted(_TOP_KEYS))}", field=str(k)
            )
    if "mix" in raw:
        return _parse_mix(raw, path, default_name)
    groups = raw.get("cluster")
    if not isinstance(groups, list) or not groups:
        raise InputFileError(path, "needs a non-empty list of node groups", field="cluster")
    try:
        cluster = build_cluster(groups)
    except (ConfigError, UnknownNameError, TypeError) as exc:
        raise InputFileError(path, str(exc), field="cluster") from exc
    framework = str(raw.get("framework", "alpa"))
    try:
        get_framework(framework)
        get_calibration(framework)
    except UnknownNameError as exc:
        raise InputFileError(path, str(exc), field="framework") from exc
    truth = str(raw.get("ground_truth", "estimator"))
    if truth not in GROUND_TRUTHS:
        raise InputFileError(
            path, f"must be one of: {', '.join(GROUND_TRUTHS)}", field="ground_truth"
        )
    wl = _section(raw, "workload", path)
    wl_keys = ("iteration_divisor", "load", "synthetic", "trace")
    for k in wl:
        if k not in wl_keys:
            raise InputFileError(
                path, f"unknown key; known: {', '.join(wl_keys)}", field=f"workload.{k}"
            )
    synthetic = _synthetic(wl.get("synthetic") or {}, path)
    try:
        workload = WorkloadSpec(
            synthetic=synthetic,
            load=None if wl.get("load") is None else float(wl["load"]),
            trace=None if wl.get("trace") is None else _trace_ref(str(wl["trace"]), path),
            iteration_divisor=wl.get("iteration_divisor"),
        )
    except (ConfigError, ValueError) as exc:
        raise InputFileError(path, str(exc), field="workload") from exc
    sim = _section(raw, "sim", path)
    compat = sim.pop("artifact_compat", None) or {}
    if not isinstance(compat, Mapping):
        raise InputFileError(path, "must be a mapping", field="sim.artifact_compat")
    sim["artifact_compat"] = _build(ArtifactCompat, compat, path, "sim.artifact_compat")
    return Scenario(
        name=str(raw.get("name", default_name)),
        description=str(raw.get("description", "")).strip(),
        cluster=cluster,
        framework=framework,
        tuner=_build(TunerConfig, _section(raw, "tuner", path), path, "tuner"),
        sim=_build(SimConfig, sim, path, "sim"),
        ground_truth=truth,  # type: ignore[arg-type]
        workload=workload,
        splits=_build(SplitSpec, _section(raw, "splits", path), path, "splits"),
        policies=_policies(_section(raw, "policies", path), path),
        path=path,
    )


def _policies(raw: Mapping[str, Any], path: str) -> tuple[tuple[str, PolicySpec], ...]:
    """``policies:`` entries: a registered name, or ``{policy: NAME, option: value, ...}``."""
    out = []
    for name, value in raw.items():
        where = f"policies.{name}"
        if isinstance(value, str):
            spec = PolicySpec(value)
        elif isinstance(value, Mapping) and isinstance(value.get("policy"), str):
            opts = {str(k): _tuples(v) for k, v in value.items() if k != "policy"}
            spec = PolicySpec(str(value["policy"]), tuple(sorted(opts.items())))
        else:
            raise InputFileError(
                path, "must be a policy name or a mapping with a 'policy' name", field=where
            )
        out.append((str(name), spec))
    return tuple(sorted(out))


@functools.cache
def load_scenario(name_or_path: str) -> Scenario:
    """Load ``envs/<name>.yaml`` or a scenario file path (cached: scenarios are immutable).

    Raises:
        UnknownNameError: no such scenario (listing the known ones).
        InputFileError: the file is malformed (naming file and key).
    """
    p = Path(name_or_path)
    if p.suffix not in (".yaml", ".yml"):
        p = scenario_dir() / f"{name_or_path}.yaml"
        if not p.is_file():
            raise UnknownNameError("scenario", name_or_path, list_scenarios())
    raw = load_yaml_file(p)
    return parse_scenario(raw, str(p), p.stem)
