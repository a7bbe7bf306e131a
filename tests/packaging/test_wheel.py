"""A wheel built from the repository runs from any directory (issue 13): it registers the ids,
``gym.make`` works, and the console scripts train and evaluate a tiny policy — with the
scenario files and hyperparameters it carries, not the checkout's.

The wheel is installed with ``--target`` into a temporary folder (its dependencies come from the
test environment) and run from another temporary folder with only that folder on the path.
"""

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    root = tmp_path_factory.mktemp("wheel")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(root / "dist"),
            str(REPO),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if build.returncode != 0:
        pytest.fail(f"wheel build failed: {build.stderr[-2000:]}")
    wheel = next((root / "dist").glob("crius_gym-*.whl"))
    target = root / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
        capture_output=True,
    )
    return target


def run_outside(target, tmp_path, *args, timeout=900):
    env = {**os.environ, "PYTHONPATH": str(target)}
    env.pop("CRIUS_GYM_ENVS", None)
    return subprocess.run(
        [*args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_wheel_registers_and_makes_envs(installed, tmp_path):
    code = (
        "import crius_gym, gymnasium as gym; "
        f"assert crius_gym.__file__.startswith({str(installed)!r}), crius_gym.__file__; "
        "env = gym.make('crius_gym/Hetero64-v4'); env.reset(seed=0); "
        "print(len(crius_gym.REGISTERED_IDS))"
    )
    out = run_outside(installed, tmp_path, sys.executable, "-c", code)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.strip()) >= 5


def test_wheel_console_scripts_train_and_evaluate(installed, tmp_path):
    bin_dir = installed / "bin"
    train = run_outside(
        installed,
        tmp_path,
        sys.executable,
        str(bin_dir / "crius-train"),
        "--scenario",
        "tiny",
        "--total-timesteps",
        "256",
        "--set",
        "n_steps=64",
        "--set",
        "batch_size=32",
        "--set",
        "eval_freq=256",
        "--set",
        "checkpoint_freq=256",
        "--set",
        "bc_episodes=1",
        "--set",
        "deploy_margins=[]",
        "--run-name",
        "w",
        "--out",
        "out",
        "--no-progress",
    )
    assert train.returncode == 0, train.stderr
    policy = tmp_path / "out" / "policies" / "w"
    assert (policy / "model.zip").is_file()
    evaluate = run_outside(
        installed,
        tmp_path,
        sys.executable,
        str(bin_dir / "crius-evaluate"),
        "--policy",
        str(policy),
        "--scenario",
        "tiny",
        "--policies",
        "fcfs",
        "--out",
        "eval",
        "--no-progress",
    )
    assert evaluate.returncode == 0, evaluate.stderr
    assert "ppo:w" in (tmp_path / "eval" / "evaluation.md").read_text()
    baselines = run_outside(
        installed, tmp_path, sys.executable, str(bin_dir / "crius-baselines"), "--help"
    )
    assert baselines.returncode == 0 and "--scenario" in baselines.stdout
