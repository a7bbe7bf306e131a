"""Expert iteration's bookkeeping, and two rounds end to end on the tiny scenario."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from crius_gym.errors import InputFileError
from crius_gym.rl.expert_iteration import (
    BASE_OVERRIDES,
    IterationLog,
    RoundRecord,
    keep_round,
    mean_score,
    round_overrides,
)


def test_round_zero_rolls_out_with_crius_and_later_rounds_with_the_best_network():
    assert round_overrides(None, 3600.0) == list(BASE_OVERRIDES)
    later = round_overrides(Path("p/best_model.zip"), 3600.0)
    assert "vine_rollout_policy=p/best_model.zip" in later
    assert "init_policy=p/best_model.zip" in later
    assert "vine_horizon_s=3600" in later
    assert "vine_future=false" in later  # present labels in every round
    assert "bc_epochs=0" in later  # the previous network is not cloned back to Crius
    assert not any(o.startswith("vine_horizon_s") for o in round_overrides(Path("x.zip"), None))


def test_a_round_is_kept_only_when_it_beats_the_best_by_the_tolerance():
    assert keep_round(0.95, None, 0.002)
    assert keep_round(0.95, 0.96, 0.002)
    assert not keep_round(0.959, 0.96, 0.002)
    assert not keep_round(0.97, 0.96, 0.002)
    assert not keep_round(math.inf, None, 0.002)
    assert mean_score({"a": 0.9, "b": 1.1}) == pytest.approx(1.0)
    assert mean_score({"a": math.nan}) == math.inf


def _record(i: int, kept: bool, score: float) -> RoundRecord:
    return RoundRecord(i, f"r{i}", f"p/r{i}.zip", None, {"s": score}, score, kept, 1.0)


def test_the_log_resumes_and_refuses_other_settings(tmp_path):
    path = tmp_path / "expert_iteration.yaml"
    log = IterationLog.open(path, {"seed": 0})
    log.add(_record(0, True, 0.98))
    log.add(_record(1, False, 0.99))
    again = IterationLog.open(path, {"seed": 0})
    assert [r.run for r in again.rounds] == ["r0", "r1"]
    assert again.best is not None and again.best.run == "r0"
    with pytest.raises(InputFileError, match="seed"):
        IterationLog.open(path, {"seed": 1})
    path.write_text("rounds: [{bogus: 1}]\n")
    with pytest.raises(InputFileError, match="not an expert-iteration log"):
        IterationLog.open(path, {})


def test_two_rounds_on_the_tiny_scenario(tmp_path):
    from crius_gym.scripts.expert_iteration import main

    args = [
        "--scenario", "tiny", "--rounds", "2", "--total-timesteps", "512", "--horizon-s", "3600",
        "--val-scenarios", "tiny", "--val-traces", "1", "--out", str(tmp_path), "--no-progress",
        "--set", "vine_fraction=0.1", "--set", "rollout_workers=0",
    ]  # fmt: skip
    main(args)
    log = yaml.safe_load((tmp_path / "ei" / "expert_iteration.yaml").read_text())
    first, second = log["rounds"]
    assert first["rollout_policy"] is None and first["kept"]
    assert second["rollout_policy"] == first["model"]
    # Labelled by the distilled policy, the round does not lose to the one before it.
    assert second["score"] <= first["score"] + 0.02
    saved = yaml.safe_load((tmp_path / "policies" / "ei-r1" / "config.yaml").read_text())
    hp = saved["hyperparams"]
    assert hp["vine_rollout_policy"] == first["model"] and hp["init_policy"] == first["model"]
    assert hp["vine_future"] is False and hp["bc_epochs"] == 0
    assert (tmp_path / "ei" / "expert_iteration.md").is_file()
    main(args)  # finished: nothing is trained again, the report is rewritten
    again = yaml.safe_load((tmp_path / "ei" / "expert_iteration.yaml").read_text())
    assert len(again["rounds"]) == 2
