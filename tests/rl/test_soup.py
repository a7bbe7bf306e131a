"""Model soups: weight averages of networks of one shape, and the greedy choice of members."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.rl.saved import (
    PolicyCompatibilityError,
    load_policy,
    model_metadata,
    policy_file,
    write_metadata,
)
from crius_gym.rl.soup import average_weights, greedy_soup
from crius_gym.scenarios import load_scenario

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference_policy"


def _env() -> CriusEnv:
    meta = model_metadata(policy_file(REFERENCE))
    return CriusEnv(load_scenario("tiny"), EnvConfig(**meta["env_config"]))


def _perturbed(env: CriusEnv, folder: Path, seed: int) -> Path:
    """The reference with noise on every weight, saved as a policy folder."""
    model, _ = load_policy(policy_file(REFERENCE), env)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.policy.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    folder.mkdir(parents=True)
    model.save(folder / "model.zip")
    write_metadata(folder, env, {"run": folder.name})
    return folder


def test_a_soup_is_the_mean_of_its_members_weights(tmp_path: Path) -> None:
    env = _env()
    a, b = _perturbed(env, tmp_path / "a", 1), _perturbed(env, tmp_path / "b", 2)
    wa = load_policy(policy_file(a), env)[0].policy.state_dict()
    wb = load_policy(policy_file(b), env)[0].policy.state_dict()
    soup = average_weights([a, b], env).policy.state_dict()
    for key in wa:
        assert torch.allclose(soup[key], (wa[key] + wb[key]) / 2, atol=1e-6), key
    # A soup of one network is that network.
    alone = average_weights([REFERENCE], env).policy.state_dict()
    ref = load_policy(policy_file(REFERENCE), env)[0].policy.state_dict()
    assert all(torch.equal(alone[k], ref[k]) for k in ref)
    with pytest.raises(ValueError, match="at least one"):
        average_weights([], env)


def test_networks_of_another_shape_do_not_average(tmp_path: Path) -> None:
    from sb3_contrib import MaskablePPO

    env = _env()
    model, _ = load_policy(policy_file(REFERENCE), env)
    kwargs = {**model.policy_kwargs, "hidden": 32}
    wide = MaskablePPO(type(model.policy), env, policy_kwargs=kwargs, device="cpu", seed=0)
    folder = tmp_path / "narrow"
    folder.mkdir()
    wide.save(folder / "model.zip")
    write_metadata(folder, env, {"run": "narrow"})
    with pytest.raises(PolicyCompatibilityError, match=r"narrow.*policy_kwargs"):
        average_weights([REFERENCE, folder], env)


def test_greedy_soup_adds_only_members_that_lower_the_score() -> None:
    # A made-up score: the mean of the members' values, so a member below the current mean helps.
    value = {"a": 0.90, "b": 0.92, "c": 0.99, "d": 0.91}
    calls: list[list[str]] = []

    def score(members: list[str]) -> float:
        calls.append(members)
        return sum(value[m] for m in members) / len(members)

    out = greedy_soup(list(value), score)
    # Alone: a 0.90 is best; + d -> 0.905 (worse than 0.90: dropped); + b dropped; + c dropped.
    assert out.members == ["a"] and out.score == pytest.approx(0.90)
    assert [c for c, _, _ in out.tried] == ["d", "b", "c"]
    assert not any(k for _, _, k in out.tried)
    assert out.alone == value

    # With a score that rewards averaging (the soup's mean minus a bonus per member) it grows.
    def bonus(members: list[str]) -> float:
        return score(members) - 0.01 * (len(members) - 1)

    grown = greedy_soup(list(value), bonus)
    assert grown.members == ["a", "d", "b"]  # c: 0.93 - 0.03 = 0.90 > 0.89, dropped
    assert grown.score == pytest.approx((0.90 + 0.91 + 0.92) / 3 - 0.02)


def test_the_script_writes_a_loadable_soup_and_resumes(tmp_path: Path) -> None:
    from crius_gym.scripts.soup import main

    env = _env()
    a = _perturbed(env, tmp_path / "a", 1)
    out = tmp_path / "soup"
    argv = [
        "--policy", str(REFERENCE), str(a), "--out", str(out),
        "--val-scenarios", "tiny", "--val-traces", "1",
    ]  # fmt: skip
    main(argv)
    model, meta = load_policy(policy_file(out), env)
    assert model is not None and meta["soup"]["members"]
    assert meta["command"] and meta["git_revision"]  # the running process's command line
    # It says what its members were trained on, not the validation scenario it was scored on.
    assert meta["scenario"] == model_metadata(policy_file(REFERENCE))["scenario"]
    assert policy_file(out).name == "best_model.zip"
    report = (out / "soup.md").read_text()
    assert "git" in report and "Chosen:" in report
    scores = yaml.safe_load((out / "soup.yaml").read_text())["scores"]
    assert len(scores) in (2, 3)  # each alone, then the two together
    stamp = (out / "soup.yaml").stat().st_mtime_ns
    main(argv)  # every score is reused: nothing is validated again
    assert (out / "soup.yaml").stat().st_mtime_ns == stamp
