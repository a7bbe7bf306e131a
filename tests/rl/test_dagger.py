"""DAgger from the lookahead: labels are the teacher's, expressible, and blind to the future."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.policies.lookahead import LookaheadOptions
from crius_gym.rl.agent import GreedyActor
from crius_gym.rl.dagger import (
    EnvLookahead,
    collect_dagger,
    load_demonstrations,
    pool,
    save_demonstrations,
)
from crius_gym.rl.saved import load_policy, model_metadata, policy_file
from crius_gym.scenarios import load_scenario

REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference_policy"
# With no alternatives and a margin no rollout reaches, the lookahead is its rollout policy.
NO_ALTERNATIVES = LookaheadOptions(head_jobs=0, cells_per_job=1, running_jobs=0, margin=0.999)


def _env(scenario: str = "tiny") -> CriusEnv:
    meta = model_metadata(policy_file(REFERENCE))
    return CriusEnv(load_scenario(scenario), EnvConfig(**meta["env_config"]))


def _guided_labels(env: CriusEnv, trace: object, options: LookaheadOptions, until_s: float):
    """(time, label) at every state with a choice before ``until_s``, the guide driving."""
    env.reset(seed=0, options={"trace": trace})
    out = []
    while env.sim.now_s < until_s:
        mask = env.action_masks()
        guide = env.guide_action()
        if mask[:-1].any():
            out.append((env.sim.now_s, EnvLookahead(env, options).label()))
        _, _, term, trunc, _ = env.step(guide)
        if term or trunc:
            break
    return out


def _one_teacher_episode(env: CriusEnv, model: object):
    """The labelled states of one teacher-driven episode (seed 0)."""
    options = LookaheadOptions(running_jobs=2)
    return collect_dagger(env, GreedyActor(model), options, [0], 1.0, np.random.default_rng(0))[0]


def test_with_no_alternatives_the_label_is_the_guides_action() -> None:
    env = _env()
    trace = env.scenario.own_trace(None, env.tuner)
    env.reset(seed=0, options={"trace": trace})
    labelled = 0
    while True:
        mask = env.action_masks()
        guide = env.guide_action()
        if mask[:-1].any():
            assert EnvLookahead(env, NO_ALTERNATIVES).label() == guide
            labelled += 1
        _, _, term, trunc, _ = env.step(guide)
        if term or trunc:
            break
    assert labelled > 10


def test_labels_are_valid_actions_and_do_not_read_future_arrivals() -> None:
    env = _env()
    trace = env.scenario.own_trace(None, env.tuner)
    jobs = sorted(trace.jobs, key=lambda j: j.arrival_s)
    cut_s = jobs[len(jobs) // 2].arrival_s
    options = LookaheadOptions(running_jobs=2)
    full = _guided_labels(env, trace, options, cut_s)
    # The same trace without the jobs that arrive at or after cut_s: another future.
    shorter = dataclasses.replace(trace, jobs=[j for j in trace.jobs if j.arrival_s < cut_s])
    cut = _guided_labels(env, shorter, options, cut_s)
    assert len(full) > 5
    assert full == cut


def test_teacher_driven_collection_labels_every_choice_and_round_trips(tmp_path: Path) -> None:
    env = _env()
    model, _ = load_policy(policy_file(REFERENCE), env)
    demos, stats = collect_dagger(
        env, GreedyActor(model), LookaheadOptions(), [0, 1], 1.0, np.random.default_rng(0)
    )
    assert stats.episodes == 2 and stats.labels == len(demos) > 0
    assert stats.teacher_steps == stats.labels  # β = 1: every label was executed
    assert 0 <= stats.agree <= stats.labels and stats.ms_per_label > 0
    wait = env.config.num_actions - 1
    for mask, action in zip(demos.masks, demos.actions, strict=True):
        assert mask[:-1].any() and mask[action]
        assert action == wait or action < wait
    path = str(tmp_path / "labels.npz")
    save_demonstrations(demos, path)
    back = load_demonstrations(path)
    assert np.array_equal(back.actions, demos.actions)
    assert np.array_equal(back.masks, demos.masks)
    assert back.obs.keys() == demos.obs.keys()
    for key in demos.obs:
        assert np.array_equal(back.obs[key], demos.obs[key])
    both = pool([demos, back])
    assert len(both) == 2 * len(demos) and both.episodes == 4
    # Regrets: one per label, non-negative where the teacher compared candidates, and kept.
    assert demos.regrets is not None and len(demos.regrets) == len(demos)
    compared = demos.regrets[np.isfinite(demos.regrets)]
    assert len(compared) > 0 and (compared >= 0).all()
    assert np.array_equal(back.regrets, demos.regrets, equal_nan=True)
    assert both.regrets is not None and len(both.regrets) == len(both)
    # Candidate costs: one row per label, finite at the label itself, kept and pooled.
    assert demos.costs is not None and demos.costs.shape == demos.masks.shape
    assert np.isfinite(demos.costs[np.arange(len(demos)), demos.actions]).mean() > 0.5
    assert np.array_equal(back.costs, demos.costs, equal_nan=True)
    assert both.costs is not None and both.costs.shape == both.masks.shape
    # A file written before costs were recorded loads with NaN rows (hard labels).
    old = str(tmp_path / "old.npz")
    with np.load(path) as data:
        np.savez(old, **{k: data[k] for k in data.files if k != "costs"})
    legacy = load_demonstrations(old)
    assert legacy.costs is not None and np.isnan(legacy.costs).all()
    assert pool([legacy, demos]).costs.shape == (2 * len(demos), demos.masks.shape[1])


def test_soft_targets_weigh_candidates_by_relative_rollout_cost() -> None:
    from crius_gym.rl.imitation import soft_targets

    nan = np.nan
    costs = np.array(
        [
            [100.0, 101.0, nan, 110.0],  # three compared: exp(0), exp(-1), -, exp(-10)
            [nan, 50.0, nan, nan],  # one compared: the hard label
            [nan, nan, nan, nan],  # none recorded: the hard label
            [0.0, 5.0, nan, nan],  # cheapest not positive: the hard label
        ]
    )
    actions = np.array([0, 1, 2, 3])
    out = soft_targets(costs, actions, 0.01)
    w = np.array([1.0, np.exp(-1.0), 0.0, np.exp(-10.0)])
    assert out[0] == pytest.approx(w / w.sum(), rel=1e-6)
    assert np.array_equal(out[1:], np.eye(4, dtype=np.float32)[[1, 2, 3]])
    assert out.sum(axis=1) == pytest.approx(np.ones(4))
    # A colder temperature moves toward the cheapest: the one-hot of the argmin.
    assert soft_targets(costs, actions, 1e-6)[0] == pytest.approx([1, 0, 0, 0], abs=1e-6)
    with pytest.raises(ValueError, match="temperature"):
        soft_targets(costs, actions, 0.0)


def test_one_hot_targets_train_as_the_hard_labels_and_regret_is_measured() -> None:
    import torch

    from crius_gym.rl.imitation import behaviour_clone, teacher_regret

    env = _env()
    runs = []
    for hard in (True, False):
        model, _ = load_policy(policy_file(REFERENCE), env)
        if hard:
            demos = _one_teacher_episode(env, model)
        one_hot = np.eye(demos.masks.shape[1], dtype=np.float32)[demos.actions]
        behaviour_clone(
            model, demos, epochs=1, learning_rate=1e-3, value_coef=0.0,
            targets=None if hard else one_hot,
        )  # fmt: skip
        runs.append([p.detach().clone() for p in model.policy.parameters()])
    for a, b in zip(*runs, strict=True):
        assert (a - b).abs().max() < 1e-4, (a - b).abs().max()
    # The regret of the network's action, by hand from its argmax and the recorded costs.
    assert demos.costs is not None
    regret, not_compared = teacher_regret(model, demos)
    from stable_baselines3.common.utils import obs_as_tensor

    with torch.no_grad():
        obs = obs_as_tensor(demos.obs, model.policy.device)
        dist = model.policy.get_distribution(obs, action_masks=demos.masks)
        pred = dist.distribution.probs.argmax(-1).numpy()
    rows = np.isfinite(demos.costs).any(axis=1)
    chosen = demos.costs[rows][np.arange(rows.sum()), pred[rows]]
    best = np.nanmin(demos.costs[rows], axis=1)
    known = np.isfinite(chosen)
    assert regret == pytest.approx(np.mean((chosen[known] - best[known]) / best[known]))
    assert not_compared == pytest.approx(np.mean(~known))
    assert regret >= 0


def test_a_labels_regret_is_its_other_candidates_mean_relative_excess() -> None:
    env = _env()
    trace = env.scenario.own_trace(None, env.tuner)
    env.reset(seed=0, options={"trace": trace})
    seen = 0
    while seen < 5:
        mask = env.action_masks()
        if mask[:-1].any():
            teacher = EnvLookahead(env, LookaheadOptions(running_jobs=2))
            captured = []
            costs_of = teacher._costs

            def spy(work, base, candidates, present, _f=costs_of, _c=captured):
                out = _f(work, base, candidates, present)
                _c.append(out)
                return out

            teacher._costs = spy  # type: ignore[method-assign]
            label = teacher.label()
            if captured and len(captured[0]) > 1:
                costs = captured[0]
                chosen = min(costs)  # no margin: the cheapest candidate is the label
                others = [c - chosen for c in costs if c != chosen]
                others += [0.0] * (len(costs) - 1 - len(others))  # ties with the chosen one
                expected = sum(others) / len(others) / chosen
                assert teacher.regret == pytest.approx(expected)
                # Every compared candidate's cost sits at its env action; the label's is least.
                recorded = teacher.costs[np.isfinite(teacher.costs)]
                assert sorted(recorded) == pytest.approx(sorted(c for c in costs if c < np.inf))
                assert label is not None and teacher.costs[label] == pytest.approx(chosen)
                seen += 1
        _, _, term, trunc, _ = env.step(env.guide_action())
        if term or trunc:
            break
    assert seen > 0


def test_regret_weights_are_regrets_over_their_mean_within_bounds() -> None:
    from crius_gym.rl.imitation import regret_weights

    w = regret_weights(np.array([0.0, 1.0, 2.0, 5.0, np.nan, 1000.0, *[1.0] * 30]))
    mean = (0.0 + 1.0 + 2.0 + 5.0 + 1000.0 + 30.0) / 35
    assert w[0] == 0.1  # the floor: no label ignored
    assert w[1:4] == pytest.approx(np.maximum(0.1, np.array([1.0, 2.0, 5.0]) / mean))
    assert w[4] == 1.0  # not recorded: the mean
    assert w[5] == 10.0  # the cap
    assert np.array_equal(regret_weights(np.zeros(3)), np.ones(3))


def test_collection_is_deterministic_and_checks_beta() -> None:
    env = _env()
    model, _ = load_policy(policy_file(REFERENCE), env)
    runs = [
        collect_dagger(
            env, GreedyActor(model), LookaheadOptions(), [3], 0.5, np.random.default_rng(7)
        )[0]
        for _ in range(2)
    ]
    assert np.array_equal(runs[0].actions, runs[1].actions)
    with pytest.raises(ValueError, match="beta"):
        collect_dagger(
            env, GreedyActor(model), LookaheadOptions(), [3], 1.5, np.random.default_rng(0)
        )


def test_the_script_runs_rounds_and_resumes_without_relabelling(tmp_path: Path) -> None:
    from crius_gym.scripts.distill_lookahead import main

    argv = [
        "--name", "t", "--init", str(REFERENCE), "--scenario", "tiny", "--rounds", "2",
        "--episodes", "2", "--epochs", "1", "--val-scenarios", "tiny", "--val-traces", "1",
        "--out", str(tmp_path), "--weights", "regret", "--soft-temperature", "0.05",
    ]  # fmt: skip
    main([*argv[:7], "1", *argv[8:]])  # round 0 only
    folder = tmp_path / "t"
    labels0 = folder / "round0" / "labels.npz"
    stamp = labels0.stat().st_mtime_ns
    main(argv)  # goes on with round 1, keeps round 0
    assert labels0.stat().st_mtime_ns == stamp
    table = (folder / "distill.csv").read_text().splitlines()
    assert len(table) == 1 + 3  # the initial network, rounds 0 and 1
    assert (folder / "round1" / "model.zip").is_file()
    assert "git" in (folder / "distill.md").read_text()
    assert "held_out_regret" in (folder / "distill.csv").read_text()
    # The saved round runs as a policy, and so does the best kept one's copy.
    env = _env()
    load_policy(policy_file(folder / "round0"), env)
    assert policy_file(folder) == folder / "best_model.zip"
    load_policy(policy_file(folder), env)
    assert "Best kept: round" in (folder / "distill.md").read_text()


def test_policy_kwargs_start_each_round_from_a_fresh_network_with_those_options(
    tmp_path: Path,
) -> None:
    from crius_gym.scripts.distill_lookahead import main

    argv = [
        "--name", "f", "--init", str(REFERENCE), "--scenario", "tiny", "--rounds", "1",
        "--episodes", "1", "--epochs", "1", "--val-traces", "0", "--out", str(tmp_path),
        "--policy-kwargs", "relative_cells=true", "--policy-kwargs", "queue_context=true",
    ]  # fmt: skip
    main(argv)
    model, _ = load_policy(policy_file(tmp_path / "f" / "round0"), _env())
    ext = model.policy.mlp_extractor
    assert ext.relative_cells and ext.queue_context
    with pytest.raises(SystemExit, match="policy-kwargs"):
        main([*argv[:-4], "--policy-kwargs", "no_such_option=1", "--name", "g"])


def test_a_round_with_added_terms_starts_as_the_init_and_another_width_as_the_guide() -> None:
    import torch

    from crius_gym.scripts.distill_lookahead import _start_model

    env = _env()
    init, _ = load_policy(policy_file(REFERENCE), env)
    added = _start_model(
        policy_file(REFERENCE), env, ["relative_cells=true", "queue_context=true"], 0
    )
    wider = _start_model(policy_file(REFERENCE), env, ["hidden=32"], 0)
    obs, _ = env.reset(seed=1)
    t = {key: torch.as_tensor(v[None]).float() for key, v in obs.items()}

    def logits(model):
        pol = model.policy
        return pol.mlp_extractor.forward_actor(pol.extract_features(t, pol.pi_features_extractor))

    assert torch.allclose(logits(added), logits(init))
    # A fresh network's residual is zero: its logits are the hint on the guide's action alone.
    ext = wider.policy.mlp_extractor
    hinted = ext.hint * ext._proposal(wider.policy.extract_features(t))
    assert torch.allclose(logits(wider), hinted)


def test_distillation_without_the_value_term_leaves_the_value_head_alone() -> None:
    import torch

    from crius_gym.rl.imitation import agreement, behaviour_clone

    env = _env()
    model, _ = load_policy(policy_file(REFERENCE), env)
    demos = _one_teacher_episode(env, model)
    value_head = [p.detach().clone() for p in model.policy.value_net.parameters()]
    everything = [p.detach().clone() for p in model.policy.parameters()]
    before = agreement(model, demos)
    behaviour_clone(model, demos, epochs=20, learning_rate=1e-3, value_coef=0.0)
    after_value = list(model.policy.value_net.parameters())
    after_all = list(model.policy.parameters())
    assert all(torch.equal(a, b) for a, b in zip(value_head, after_value, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(everything, after_all, strict=True))
    assert agreement(model, demos) >= before  # it fits its own labels at least as well


def test_env_set_carries_the_inits_weights_to_a_network_for_the_new_spaces(
    tmp_path: Path,
) -> None:
    import torch

    from crius_gym.scripts.distill_lookahead import main

    argv = [
        "--name", "c", "--init", str(REFERENCE), "--scenario", "tiny", "--rounds", "1",
        "--episodes", "1", "--epochs", "1", "--val-traces", "0", "--out", str(tmp_path),
        "--env-set", "cells_per_job=9",
    ]  # fmt: skip
    main(argv)
    env = CriusEnv(
        load_scenario("tiny"),
        dataclasses.replace(
            EnvConfig(**model_metadata(policy_file(REFERENCE))["env_config"]), cells_per_job=9
        ),
    )
    moved, _ = load_policy(policy_file(tmp_path / "c" / "init"), env)
    ref, _ = load_policy(policy_file(REFERENCE), _env())
    for (name, a), b in zip(
        ref.policy.state_dict().items(), moved.policy.state_dict().values(), strict=True
    ):
        assert torch.equal(a, b), name
    assert (
        model_metadata(policy_file(tmp_path / "c" / "round0"))["env_config"]["cells_per_job"] == 9
    )
    with pytest.raises(SystemExit, match="--env-set"):
        main([*argv[:-2], "--env-set", "no_such_setting=1", "--name", "d"])


def test_the_network_teacher_labels_with_its_lookaheads_choice() -> None:
    """The label is the cheapest of the network's candidates by its own rollouts."""
    from crius_gym.rl.network_lookahead import (
        NetworkLookaheadOptions,
        NetworkTeacher,
        cheapest,
        network_candidates,
    )
    from crius_gym.rl.network_rollouts import NetworkRollouts

    env = _env()
    model, _ = load_policy(policy_file(REFERENCE), env)
    options = NetworkLookaheadOptions(top_k=3, horizon_s=3600.0)
    teacher = NetworkTeacher(model, options)
    demos, stats = collect_dagger(
        env, GreedyActor(model), teacher, [0], 1.0, np.random.default_rng(0)
    )
    assert stats.labels == len(demos) > 0 and stats.unlabelled == 0
    assert all(demos.masks[i, a] for i, a in enumerate(demos.actions))
    # Recomputed at a fresh state, the label is the rollouts' cheapest candidate.
    env.reset(seed=1)
    while not env.action_masks()[:-1].any():
        env.step(int(np.flatnonzero(env.action_masks())[0]))
    obs, mask = env.current_observation(), env.action_masks()
    label = teacher(env, obs, mask)
    rollouts = NetworkRollouts(model, 3600.0)
    actions = network_candidates(rollouts.logits([obs])[0], mask, options)
    costs = rollouts.costs(env, actions)
    assert label.action == actions[cheapest(actions, costs)]
    assert np.allclose(label.costs[actions], costs, rtol=1e-6)


@pytest.mark.slow
def test_an_expert_iteration_round_labels_with_the_distilled_policy_and_does_not_lose(
    tmp_path: Path,
) -> None:
    """Issue 34: a round on tiny labelled by the network's lookahead is kept only if it wins."""
    import yaml

    from crius_gym.scripts.distill_lookahead import main

    main([
        "--name", "ei", "--init", str(REFERENCE), "--scenario", "tiny", "--rounds", "2",
        "--episodes", "3", "--epochs", "2", "--val-scenarios", "tiny", "--val-traces", "2",
        "--out", str(tmp_path), "--teacher", "network", "--set", "top_k=3",
        "--set", "horizon_s=7200",
    ])  # fmt: skip
    log = yaml.safe_load((tmp_path / "ei" / "distill.yaml").read_text())
    assert log["settings"]["teacher"]["kind"] == "network"
    rounds = {r["round"]: r for r in log["rounds"]}
    assert set(rounds) == {-1, 0, 1}
    # Round 1 is labelled through the lookahead of the best network kept so far.
    driver = rounds[1]["labelling"]["driver"]
    best = max((r for r in (rounds[-1], rounds[0]) if r["kept"]), key=lambda r: r["round"])
    assert Path(driver) == Path(best["policy"])
    # The kept network never scores worse than the one before it (the keep rule).
    kept = [r["score"] for r in sorted(rounds.values(), key=lambda r: r["round"]) if r["kept"]]
    assert kept == sorted(kept, reverse=True)
