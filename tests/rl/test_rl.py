import numpy as np
import pytest
import torch
import yaml
from stable_baselines3.common.env_util import make_vec_env

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.errors import ConfigError, InputFileError
from crius_gym.policies.registry import make_policy
from crius_gym.rl.agent import HeuristicDriver, run_model
from crius_gym.rl.imitation import behaviour_clone, collect_demonstrations
from crius_gym.rl.networks import _CELL_IS_CURRENT, TableLayout
from crius_gym.rl.ppo import make_model, resolve_hyperparams
from crius_gym.rl.saved import PolicyCompatibilityError, load_policy, write_metadata
from crius_gym.scenarios import load_scenario


def tiny_model(policy="rowwise", overrides=(), **env):
    hp = resolve_hyperparams("tiny", overrides=[f"policy={policy}", *overrides])
    venv = make_vec_env(lambda: CriusEnv("tiny", config=env), n_envs=1, seed=0)
    return make_model(hp, venv, 0, None)


def test_hyperparams_resolution_and_errors(tmp_path):
    hp = resolve_hyperparams("tiny", overrides=["n_steps=64", "env.reconfigure=true"])
    assert hp.n_steps == 64 and hp.env["reconfigure"] is True
    assert hp.total_timesteps == 2048  # from the tiny block
    assert resolve_hyperparams("hetero-64").n_envs == 32  # default block
    with pytest.raises(ConfigError):
        resolve_hyperparams("tiny", overrides=["learning_rat=1"])
    bad = tmp_path / "ppo.yaml"
    bad.write_text(yaml.safe_dump({"default": {"n_stepz": 3}}))
    with pytest.raises(InputFileError) as err:
        resolve_hyperparams("tiny", bad)
    assert err.value.field == "default.n_stepz"


_COMPARING = ("policy_kwargs.relative_cells=true", "policy_kwargs.queue_context=true")


@pytest.mark.parametrize(
    ("env", "overrides"), [({}, ()), ({"reconfigure": False}, ()), ({}, _COMPARING)]
)
def test_row_scorer_is_permutation_equivariant(env, overrides):
    torch.manual_seed(0)
    model = tiny_model(overrides=overrides, **env)
    e = CriusEnv("tiny", config=env)
    obs, _ = e.reset(seed=0)
    for _ in range(3):  # move to a state with several window jobs
        obs, *_ = e.step(int(np.flatnonzero(e.action_masks())[-1]))
    lay = TableLayout.from_space(e.observation_space)
    k, c, f_job, f_cell = lay.jobs, lay.cells, len(obs["jobs"]) // lay.jobs, lay.cell_features
    perm = np.roll(np.arange(k), 3)
    permuted = dict(obs)
    permuted["jobs"] = obs["jobs"].reshape(k, f_job)[perm].reshape(-1)
    permuted["cells"] = obs["cells"].reshape(k, c, f_cell)[perm].reshape(-1)
    pol = model.policy

    def logits(o):
        t = {key: torch.as_tensor(v[None]).float() for key, v in o.items()}
        return pol.mlp_extractor.forward_actor(pol.extract_features(t, pol.pi_features_extractor))

    a, b = logits(obs)[0], logits(permuted)[0]
    kc = k * c
    assert torch.allclose(a[:kc].reshape(k, c)[perm], b[:kc].reshape(k, c), atol=1e-5)
    assert torch.allclose(a[-1], b[-1], atol=1e-5)  # WAIT does not depend on the order


def test_row_scorer_heads_give_the_same_numbers_alone_and_together():
    """forward() shares one encoding between the heads: the same outputs as each head alone."""
    torch.manual_seed(0)
    model = tiny_model()
    e = CriusEnv("tiny")
    obs, _ = e.reset(seed=0)
    batch = {key: torch.as_tensor(np.stack([v, v * 0.5])).float() for key, v in obs.items()}
    pol = model.policy
    ext = pol.mlp_extractor
    for module in (ext.cell_score, ext.wait_score):  # non-zero scorers: logits that vary
        torch.nn.init.normal_(module[-1].weight)
    features = pol.extract_features(batch)
    together = ext(features)
    alone = (ext.forward_actor(features), ext.forward_critic(features))
    for a, b in zip(together, alone, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("guide_inputs", [True, False])
def test_residual_without_guide_inputs_sees_the_guide_only_through_the_hint(guide_inputs):
    """guide_inputs=False: changing the guide's columns changes the logits by the hint alone."""
    torch.manual_seed(0)
    hp = resolve_hyperparams(
        "tiny", overrides=[f"policy_kwargs.guide_inputs={str(guide_inputs).lower()}"]
    )
    model = make_model(hp, make_vec_env(lambda: CriusEnv("tiny"), n_envs=1, seed=0), 0, None)
    ext = model.policy.mlp_extractor
    assert ext.guide_inputs is guide_inputs
    for module in (ext.cell_score, ext.wait_score):  # scorers that vary
        torch.nn.init.normal_(module[-1].weight)
    e = CriusEnv("tiny")
    obs, _ = e.reset(seed=0)
    features = model.policy.extract_features(
        {key: torch.as_tensor(v[None]).float() for key, v in obs.items()}
    )
    mask = ext.layout.guide_free_mask()
    assert 0 < int((mask == 0).sum()) < mask.numel()
    # Another guide: every guide column moved, every other feature as it was.
    other = features * mask + (1 - mask) * torch.rand_like(features)

    def residual(x):
        logits = ext.forward_actor(x)
        return logits - ext.hint * ext._proposal(x), ext.forward_critic(x)

    (a, va), (b, vb) = residual(features), residual(other)
    assert torch.allclose(a, b, atol=1e-6) is not guide_inputs  # the hint's sum rounds
    assert torch.equal(va, vb) is not guide_inputs


def test_factored_pair_scorer_equals_the_scorer_on_the_concatenated_rows():
    """The first layer split into Cell, job and context parts is the same function."""
    from crius_gym.rl.networks import _factored, _mlp

    torch.manual_seed(0)
    f, h = 7, 5
    scorer = _mlp([f + 2 * h, h, 1], final_activation=False)
    rows, emb, ctx = torch.randn(3, 4, 6, f), torch.randn(3, 4, h), torch.randn(3, h)
    pair = torch.cat(
        [rows, emb.unsqueeze(2).expand(-1, -1, 6, h), ctx[:, None, None, :].expand(-1, 4, 6, h)],
        -1,
    )
    expected = scorer(pair).squeeze(-1)
    got = _factored(scorer, rows, emb, ctx)
    assert got.shape == (3, 4, 6)
    assert torch.allclose(got, expected, atol=1e-6)
    got.sum().backward()  # gradients reach every parameter, as through the concatenation
    assert all(p.grad is not None for p in scorer.parameters())


@pytest.mark.parametrize("policy", ["fcfs", "random", "crius"])
def test_heuristic_through_env_matches_simulator(policy):
    """Parity: every decision the env can express goes through it, the rest beside it."""
    sc = load_scenario("tiny")
    for cfg in (
        {"stop_at_every_event": True},
        {"stop_at_every_event": True, "reconfigure": True, "window_jobs": 16, "cells_per_job": 16},
    ):
        env = CriusEnv(sc, config=cfg)
        for i in range(2):
            trace = sc.synthetic_trace("test", i)
            via_env, stats = HeuristicDriver(make_policy(policy), seed=0).run(env, trace)
            direct = sc.make_simulator().run(trace, make_policy(policy), seed=0)
            assert via_env.jobs == direct.jobs
            assert via_env.summary == direct.summary
            if policy != "fcfs" and cfg.get("reconfigure"):
                assert stats.external == 0  # wide windows express every decision


def test_behaviour_cloning_learns_the_expert():
    model = tiny_model()
    env = CriusEnv("tiny")
    demos = collect_demonstrations(env, "crius", episodes=6, gamma=0.99)
    assert len(demos) > 20
    stats = behaviour_clone(model, demos, epochs=20, batch_size=32, learning_rate=1e-3)
    chance = float(np.mean([1 / m.sum() for m in demos.masks]))
    assert stats["bc_accuracy"] > chance + 0.25
    # Cloning uses its own optimizer: PPO's starts fresh, at its own rate.
    assert not model.policy.optimizer.state
    with pytest.raises(InputFileError, match="bc_learning_rate"):
        resolve_hyperparams("tiny", overrides=["bc_learning_rate=0"])


def test_saved_policy_round_trip_and_refusals(tmp_path):
    model = tiny_model()
    env = CriusEnv("tiny")
    model.save(tmp_path / "model.zip")
    write_metadata(tmp_path, env, {"run": "t"})
    loaded, _ = load_policy(tmp_path / "model.zip", env)
    res, invalid = run_model(loaded, env, load_scenario("tiny").synthetic_trace("test", 0))
    assert invalid == 0 and res.summary.finished + res.summary.rejected == 16
    with pytest.raises(PolicyCompatibilityError, match="spaces"):
        load_policy(tmp_path / "model.zip", CriusEnv("tiny", config={"reconfigure": False}))
    meta_file = tmp_path / "metadata.yaml"
    data = yaml.safe_load(meta_file.read_text())
    for version in (1, 3, 99):  # v4 added the guide's features and Cells
        data["env_version"] = version
        meta_file.write_text(yaml.safe_dump(data))
        with pytest.raises(PolicyCompatibilityError, match="version"):
            load_policy(tmp_path / "model.zip", env)
    (tmp_path / "lonely").mkdir()
    model.save(tmp_path / "lonely" / "m.zip")
    with pytest.raises(PolicyCompatibilityError, match="metadata"):
        load_policy(tmp_path / "lonely" / "m.zip", env)
    # Hand-written metadata: a missing or foreign env_config names the file and the field.
    data["env_version"] = 4
    for bad, says in (
        (None, "'env_config': missing"),
        ({"windw_jobs": 8}, "env_config.windw_jobs"),
    ):
        data["env_config"] = bad
        meta_file.write_text(yaml.safe_dump(data))
        with pytest.raises(PolicyCompatibilityError, match=says) as err:
            load_policy(tmp_path / "model.zip", env)
        assert str(meta_file) in str(err.value)


def test_learning_rate_schedules():
    from crius_gym.rl.ppo import learning_rate_schedule

    assert learning_rate_schedule(3e-4) == 3e-4
    lin = learning_rate_schedule("lin_1e-4")
    assert lin(1.0) == pytest.approx(1e-4) and lin(0.5) == pytest.approx(5e-5)
    with pytest.raises(ConfigError):
        learning_rate_schedule("cosine_1e-4")
    hp = resolve_hyperparams("tiny", overrides=["learning_rate=lin_3e-4", "target_kl=0.02"])
    assert callable(hp.ppo_kwargs()["learning_rate"]) and hp.ppo_kwargs()["target_kl"] == 0.02


@pytest.mark.parametrize("relative", [False, True])
def test_relative_cells_score_a_move_against_the_current_cell(relative):
    """relative_cells: a running job's other Cells are scored against its current one."""
    torch.manual_seed(0)
    model = tiny_model(overrides=[f"policy_kwargs.relative_cells={str(relative).lower()}"])
    pol = model.policy
    ext = pol.mlp_extractor
    assert ext.relative_cells is relative
    torch.nn.init.normal_(ext.run_cell_score[-1].weight)
    lay = ext.layout
    e = CriusEnv("tiny")
    obs, _ = e.reset(seed=0)
    feats = pol.extract_features({k: torch.as_tensor(v[None]).float() for k, v in obs.items()})
    a, b = lay.offsets["running_cells"]
    f = lay.cell_features
    cells = feats[0, a:b].reshape(lay.running, lay.cells, f)
    cells[0, 0, :] = torch.rand(f)
    cells[0, 0, _CELL_IS_CURRENT] = 1.0  # running job 0 sits on its Cell 0
    cells[0, 1:, _CELL_IS_CURRENT] = 0.0
    other = feats.clone()
    other[0, a:b].reshape(lay.running, lay.cells, f)[0, 0, :5] += 1.0  # its current Cell changes

    def run_logits(x):
        start = lay.jobs * lay.cells
        return ext.forward_actor(x)[0, start : start + lay.cells]  # running job 0's Cells

    x, y = run_logits(feats), run_logits(other)
    assert not torch.allclose(x[0], y[0])  # the current Cell's own score moves either way
    assert torch.allclose(x[1:], y[1:]) is not relative


def test_a_network_without_the_options_loads_into_one_with_them_and_computes_the_same():
    torch.manual_seed(0)
    plain = tiny_model()
    for module in (plain.policy.mlp_extractor.cell_score, plain.policy.mlp_extractor.wait_score):
        torch.nn.init.normal_(module[-1].weight)
    richer = tiny_model(overrides=_COMPARING)
    missing, unexpected = richer.policy.load_state_dict(plain.policy.state_dict(), strict=False)
    assert sorted(missing) == ["mlp_extractor.ctx_queue.weight", "mlp_extractor.run_rel.weight"]
    assert not unexpected
    e = CriusEnv("tiny")
    obs, _ = e.reset(seed=0)
    for _ in range(3):
        obs, *_ = e.step(int(np.flatnonzero(e.action_masks())[-1]))
    t = {key: torch.as_tensor(v[None]).float() for key, v in obs.items()}

    def outputs(model):
        pol = model.policy
        return pol.mlp_extractor(pol.extract_features(t, pol.pi_features_extractor))

    assert not torch.equal(outputs(plain)[0], outputs(richer)[0])  # the added terms count
    richer.policy.mlp_extractor.zero_added_terms()
    for a, b in zip(outputs(plain), outputs(richer), strict=True):
        assert torch.equal(a, b)
