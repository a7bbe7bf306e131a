"""Exact resume (issue 37, item 6): a run continued from a checkpoint with its training state
ends with the weights and the validation history of the run that was never stopped; one
continued from the weights alone does not (the control that shows the check can fail)."""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml

from crius_gym.errors import RunStateError
from crius_gym.rl import training_state
from crius_gym.rl.checkpoints import CheckpointCallback, latest_checkpoint, latest_exact
from tests.experiments.test_rl_scripts import TINY, run


def weights(path: Path) -> str:
    """The network's and optimizer's bytes, as saved (the zip's own metadata aside)."""
    with zipfile.ZipFile(path) as z:
        return hashlib.sha256(z.read("policy.pth") + z.read("policy.optimizer.pth")).hexdigest()


def as_if_killed_after(src: Path, dst: Path, steps: int) -> None:
    """``src``'s folder as a SIGKILL after the checkpoint of ``steps`` would have left it: later
    checkpoints, the final model and the finished metadata gone; the validation history and
    the best model of later steps still there (they are written as they come)."""
    shutil.copytree(src, dst)
    (dst / "model.zip").unlink()
    for ckpt in (dst / "checkpoints").glob("model_*.zip"):
        if int(ckpt.stem.split("_")[1]) > steps:
            ckpt.unlink()
            training_state.state_path(ckpt).unlink(missing_ok=True)
    meta = yaml.safe_load((dst / "metadata.yaml").read_text())
    for key in ("timesteps", "interrupted", "train_seconds", "best_validation", "deployment"):
        meta.pop(key, None)
    (dst / "metadata.yaml").write_text(yaml.safe_dump({**meta, "in_progress": True}))


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted tiny run keeping every checkpoint (0 and 256 of 512 steps)."""
    out = tmp_path_factory.mktemp("exact")
    res = run(
        "experiments/train_ppo.py",
        *TINY,
        "--set",
        "keep_checkpoints=0",
        "--out",
        str(out),
        "--run-name",
        "a",
    )
    assert res.returncode == 0, res.stderr
    return out


def test_every_checkpoint_of_a_run_is_exact(finished: Path) -> None:
    ckpts = finished / "policies" / "a" / "checkpoints"
    steps = sorted(int(p.stem.split("_")[1]) for p in ckpts.glob("model_*.zip"))
    assert steps[0] == 0 and len(steps) >= 2
    for s in steps:
        state = training_state.load_state(ckpts / f"state_{s}{training_state.SUFFIX}")
        assert state["num_timesteps"] == s


@pytest.mark.parametrize("exact", [True, False], ids=["with-state", "weights-only"])
def test_resumed_run_matches_the_uninterrupted_one_only_with_its_state(
    finished: Path, exact: bool
) -> None:
    a = finished / "policies" / "a"
    name = f"b-{exact}"
    b = finished / "policies" / name
    as_if_killed_after(a, b, 256)
    if not exact:
        for state in (b / "checkpoints").glob(f"*{training_state.SUFFIX}"):
            state.unlink()
    res = run("experiments/train_ppo.py", "--out", str(finished), "--resume", name, "--no-progress")
    assert res.returncode == 0, res.stderr
    if exact:
        assert "with its training state" in res.stdout
        assert weights(b / "model.zip") == weights(a / "model.zip")
        # Validation rows after the checkpoint were dropped and recorded again, identically.
        assert (b / "evaluations.csv").read_text() == (a / "evaluations.csv").read_text()
    else:
        assert "weights only" in res.stdout
        assert weights(b / "model.zip") != weights(a / "model.zip"), (
            "a weights-only resume matched too: the exact-resume check above proves nothing"
        )


def test_a_damaged_state_file_is_refused_with_its_name(finished: Path) -> None:
    b = finished / "policies" / "damaged"
    as_if_killed_after(finished / "policies" / "a", b, 256)
    state = b / "checkpoints" / f"state_256{training_state.SUFFIX}"
    state.write_bytes(state.read_bytes()[:1000])
    res = run("experiments/train_ppo.py", "--out", str(finished), "--resume", "damaged")
    assert res.returncode != 0
    assert str(state) in res.stderr and "Traceback" not in res.stderr
    with pytest.raises(RunStateError, match="not a readable training state"):
        training_state.load_state(state)


def test_resume_prefers_the_newest_exact_checkpoint(tmp_path: Path) -> None:
    """A weights-only checkpoint (Ctrl-C, mid-phase) or one whose state was never written (a
    kill between the two files) is newer; the resume takes the exact pair before it."""
    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    for s in (0, 256, 384, 400):
        (ckpts / f"model_{s}.zip").write_bytes(b"zip")
    for s in (0, 256):
        (ckpts / f"state_{s}{training_state.SUFFIX}").write_bytes(b"state")
    exact = latest_exact(tmp_path)
    assert exact is not None and exact.timesteps == 256
    assert exact.state == ckpts / f"state_256{training_state.SUFFIX}"
    latest = latest_checkpoint(tmp_path)
    assert latest is not None and latest.name == "model_400.zip"


@pytest.mark.parametrize("keep", [1, 2, 0])
def test_pruning_keeps_the_newest_exact_pairs_and_newer_weights(tmp_path: Path, keep: int) -> None:
    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    for s in (0, 256, 512, 768, 800):
        (ckpts / f"model_{s}.zip").write_bytes(b"zip")
    for s in (0, 256, 512, 1024):  # 1024: an orphan state (its zip is gone)
        (ckpts / f"state_{s}{training_state.SUFFIX}").write_bytes(b"state")
    CheckpointCallback(256, tmp_path, keep)._prune()
    left = sorted(p.name for p in ckpts.iterdir())
    exact = {1: [512], 2: [256, 512], 0: [0, 256, 512]}[keep]
    zips = sorted({*exact, 768, 800}) if keep else [0, 256, 512, 768, 800]
    want = sorted(
        [f"model_{s}.zip" for s in zips] + [f"state_{s}{training_state.SUFFIX}" for s in exact]
    )
    assert left == want
