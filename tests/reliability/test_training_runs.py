"""Training runs are never lost: a new run refuses an existing folder, a resume with nothing to
resume from refuses (instead of starting over on top of the run), a resume never shortens a
run, and a resume keeps the run's first command (issue 14, item 2)."""

import pytest
import yaml

from crius_gym.errors import RunStateError
from crius_gym.rl.ppo import resolve_hyperparams
from crius_gym.rl.train import TrainSpec, train


def spec_in(tmp_path, command="train_ppo.py --first", **hp_overrides):
    overrides = [f"{k}={v}" for k, v in hp_overrides.items()]
    return TrainSpec(
        run="r",
        scenario="tiny",
        hyperparams=resolve_hyperparams("tiny", overrides=overrides),
        seed=0,
        policy_dir=tmp_path / "policies" / "r",
        runs_dir=tmp_path / "runs" / "r",
        provenance={"command": command, "date": "2026-01-01T00:00:00"},
        progress=False,
    )


def folder_state(d):
    return {p.name: p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def test_resume_without_checkpoint_refuses_and_keeps_the_run(tmp_path):
    spec = spec_in(tmp_path)
    spec.save_config()
    (spec.policy_dir / "model.zip").write_bytes(b"weights of a killed run")
    (spec.policy_dir / "metadata.yaml").write_text("in_progress: true\n")
    before = folder_state(spec.policy_dir)
    with pytest.raises(RunStateError, match=r"nothing to resume.*no checkpoint") as err:
        train(spec, resume=True, log=lambda _m: None)
    assert str(spec.policy_dir) in str(err.value)
    assert folder_state(spec.policy_dir) == before


def test_resume_of_a_finished_run_needs_more_timesteps(tmp_path):
    spec = spec_in(tmp_path)
    spec.save_config()
    (spec.policy_dir / "model.zip").write_bytes(b"final weights")
    total = spec.hyperparams.total_timesteps
    (spec.policy_dir / "metadata.yaml").write_text(f"in_progress: false\ntimesteps: {total}\n")
    with pytest.raises(RunStateError, match=r"finished at .* larger --total-timesteps"):
        train(spec, resume=True, log=lambda _m: None)


def test_new_run_never_overwrites_an_existing_one(tmp_path):
    spec = spec_in(tmp_path)
    spec.save_config()
    before = folder_state(spec.policy_dir)
    with pytest.raises(RunStateError, match=r"exists; continue it with --resume r"):
        train(spec, log=lambda _m: None)
    assert folder_state(spec.policy_dir) == before


def test_resume_never_shrinks_the_run_target(tmp_path):
    spec = spec_in(tmp_path)
    spec.save_config()
    total = spec.hyperparams.total_timesteps
    short = TrainSpec.from_saved(spec.policy_dir, spec.runs_dir, {}, total_timesteps=total - 1)
    assert short.hyperparams.total_timesteps == total - 1  # this session stops earlier
    short.save_config()
    saved = yaml.safe_load((spec.policy_dir / "config.yaml").read_text())
    assert saved["hyperparams"]["total_timesteps"] == total  # the run's target is kept
    assert saved["resumed_by"][-1]["total_timesteps"] == total - 1


def test_resume_below_the_trained_timesteps_is_refused(tmp_path):
    spec = spec_in(tmp_path)
    spec.save_config()
    (spec.policy_dir / "checkpoints").mkdir()
    (spec.policy_dir / "checkpoints" / "model_1000.zip").write_bytes(b"x")
    short = TrainSpec.from_saved(spec.policy_dir, spec.runs_dir, {}, total_timesteps=500)
    with pytest.raises(
        RunStateError, match=r"already trained 1000 timesteps >= --total-timesteps 500"
    ):
        train(short, resume=True, log=lambda _m: None)


def test_resume_keeps_the_first_command(tmp_path):
    spec = spec_in(tmp_path)
    spec.save_config()
    again = TrainSpec.from_saved(
        spec.policy_dir,
        spec.runs_dir,
        {"command": "train_ppo.py --resume r", "date": "2026-01-02T00:00:00"},
        total_timesteps=spec.hyperparams.total_timesteps * 2,
    )
    again.save_config()
    saved = yaml.safe_load((spec.policy_dir / "config.yaml").read_text())
    assert saved["command"] == "train_ppo.py --first"
    assert saved["resumed_by"] == [
        {
            "command": "train_ppo.py --resume r",
            "date": "2026-01-02T00:00:00",
            "total_timesteps": spec.hyperparams.total_timesteps * 2,
        }
    ]
    assert saved["hyperparams"]["total_timesteps"] == spec.hyperparams.total_timesteps * 2


def test_broken_run_config_names_the_file(tmp_path):
    d = tmp_path / "policies" / "r"
    d.mkdir(parents=True)
    (d / "config.yaml").write_text("scenario: [unclosed\n")
    with pytest.raises(Exception, match=r"config.yaml, line 2: not readable YAML"):
        TrainSpec.from_saved(d, tmp_path / "runs" / "r", {})


def test_training_envs_use_the_scenario_file_not_its_namesake(tmp_path):
    """A custom file named like a packaged scenario trains on the file's cluster (issue 14 #1)."""
    from crius_gym.env.config import EnvConfig
    from crius_gym.rl.train import build_vec_env

    path = tmp_path / "tiny.yaml"
    path.write_text(
        "name: tiny\ncluster:\n  - {gpu: a100, nodes: 3, gpus_per_node: 2}\n"
        "workload: {synthetic: {num_jobs: 6}}\nsplits: {train_episode_jobs: 6}\n"
    )
    hp = resolve_hyperparams("tiny", overrides=["n_envs=1"])
    venv = build_vec_env(hp, str(path), EnvConfig(**dict(hp.env)), 0)
    try:
        cluster = venv.envs[0].unwrapped.scenario.cluster
        assert cluster.num_gpus == 6 and cluster.gpu_types == ("a100-40gb",)
    finally:
        venv.close()
