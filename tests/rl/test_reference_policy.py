"""The committed reference policy loads, runs, and is refused by an incompatible env."""

from __future__ import annotations

import shutil

import pytest
import yaml

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.rl.agent import run_model
from crius_gym.rl.saved import PolicyCompatibilityError, load_policy, read_metadata
from crius_gym.scenarios import load_scenario
from tests.conftest import REPO

REF = REPO / "results" / "reference_policy"


@pytest.fixture
def reference():
    path = REF / "best_model.zip"
    if not path.is_file():
        pytest.skip(f"{path} absent (export one with experiments/export_policy.py)")
    return path


def test_reference_policy_loads_and_runs(reference):
    meta = read_metadata(reference)
    assert meta["env_version"] == 4 and meta["exported"]["from"]
    sc = load_scenario("tiny")
    env = CriusEnv(sc, EnvConfig(**{**meta["env_config"], "max_decisions": 10**12}))
    model, _ = load_policy(reference, env)
    res, invalid = run_model(model, env, sc.synthetic_trace("test", 0))
    assert invalid == 0 and res.summary.finished == len(res.jobs)
    assert reference.stat().st_size < 1_000_000  # a few hundred KB


def test_reference_policy_is_refused_by_another_env_version(reference, tmp_path):
    copy = tmp_path / "ref"
    shutil.copytree(REF, copy)
    meta = yaml.safe_load((copy / "metadata.yaml").read_text())
    meta["env_version"] = 3
    (copy / "metadata.yaml").write_text(yaml.safe_dump(meta))
    env = CriusEnv("tiny", EnvConfig(**meta["env_config"]))
    with pytest.raises(PolicyCompatibilityError, match="version 3"):
        load_policy(copy / "best_model.zip", env)


def test_an_agent_task_keeps_the_whole_run(reference):
    """Evaluation tasks return the agent's run with its schedule, relabelled only."""
    from crius_gym.eval.tasks import AgentTask, execute

    meta = read_metadata(reference)
    sc = load_scenario("tiny")
    trace = sc.synthetic_trace("test", 0)
    got = execute(AgentTask("ppo:ref", str(reference), "tiny", meta["env_config"], trace))
    assert got.result.policy == "ppo:ref" and got.invalid_actions == 0
    assert got.result.segments  # the Gantt chart's input survives the task boundary
    assert sum(s.ended == "finish" for s in got.result.segments) == got.result.summary.finished


@pytest.mark.slow
def test_the_bare_reference_network_keeps_its_committed_validation_ratio(reference):
    """The bare network (no margin, no envelope) on the validation traces its run was selected
    on, scenario by scenario: within 0.01 of the committed ratio (equal on the machine that
    trained it; another host's floating point may change an action somewhere)."""
    from crius_gym.rl.expert_iteration import bare_validation

    committed = yaml.safe_load((REF / "best.yaml").read_text())
    config = yaml.safe_load((REF / "config.yaml").read_text())
    hp = config["hyperparams"]
    prefix = "eval_jct_ratio["
    per_scenario = {k[len(prefix) : -1]: v for k, v in committed.items() if k.startswith(prefix)}
    if not per_scenario:  # a run validated on one scenario: the ratio is that scenario's
        name = (hp["eval_scenarios"] or [config["scenario"]])[0]
        per_scenario = {name: committed["eval_jct_ratio"]}
    # eval_traces is a cap: each scenario's validation_traces bounds it, here as in training.
    got = bare_validation(reference, list(per_scenario), int(hp["eval_traces"]))
    for name, ratio in per_scenario.items():
        assert got[name] <= ratio + 0.01, (name, got[name], ratio)
