"""The DAgger teacher as a policy: a known answer, the counts, and the report script."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.policies.lookahead import LookaheadOptions
from crius_gym.rl.saved import model_metadata, policy_file
from crius_gym.rl.teacher_run import REASONS, run_guide, run_teacher
from crius_gym.scenarios import load_scenario

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference_policy"
# With no alternatives and a margin no rollout reaches, the lookahead is its rollout policy.
NO_ALTERNATIVES = LookaheadOptions(head_jobs=0, cells_per_job=1, running_jobs=0, margin=0.999)


def _env() -> CriusEnv:
    meta = model_metadata(policy_file(REFERENCE))
    return CriusEnv(load_scenario("tiny"), EnvConfig(**meta["env_config"]))


def test_a_teacher_with_no_alternatives_runs_the_guides_schedule() -> None:
    env = _env()
    trace = env.scenario.own_trace(None, env.tuner)
    guide = run_guide(env, trace)
    run = run_teacher(env, NO_ALTERNATIVES, trace)
    assert run.labels > 0
    assert run.metrics["avg_jct_censored_s"] == guide["avg_jct_censored_s"]
    assert run.metrics["avg_throughput"] == guide["avg_throughput"]


def test_inexpressible_choices_are_counted_by_known_reasons() -> None:
    env = _env()
    trace = env.scenario.own_trace(None, env.tuner)
    run = run_teacher(env, LookaheadOptions(running_jobs=2), trace, compare_free=True)
    assert run.compared >= run.labels > 0
    assert set(run.inexpressible) <= set(REASONS)
    assert 0.0 <= run.inexpressible_share <= 1.0
    assert sum(run.inexpressible.values()) <= run.compared


def test_script_writes_the_paired_table(tmp_path: Path) -> None:
    from crius_gym.scripts.teacher_ceiling import main

    main(
        [
            "--scenario",
            "tiny",
            "--traces",
            "own",
            "--free",
            "--compare-free",
            "--set",
            "running_jobs=2",
            "--out",
            str(tmp_path),
        ]
    )
    text = (tmp_path / "teacher.md").read_text()
    assert "Produced by" in text and "| tiny | 1 |" in text
    df = pd.read_csv(tmp_path / "teacher.csv")
    assert len(df) == 1 and df["labels"].iloc[0] > 0
    assert df["teacher_jct_ratio"].iloc[0] > 0 and df["lookahead_jct_ratio"].iloc[0] > 0
