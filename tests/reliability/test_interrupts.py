"""Interrupts at every phase of train_ppo.py end cleanly (issue 14, item 7): during start-up
(no traceback, nothing claimed saved), a second SIGTERM while the interrupt checkpoint is being
written does not break it, and Ctrl-C to the whole process group with ``vec_env=subproc`` (the
env workers get it too) saves like a Ctrl-C to the trainer alone."""

import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import yaml

from tests.conftest import REPO
from tests.experiments.test_rl_scripts import TINY


def start(tmp_path, name, total="200000", extra=(), new_group=False):
    args = [*TINY, "--out", str(tmp_path), "--run-name", name, *extra]
    args[args.index("--total-timesteps") + 1] = total
    return subprocess.Popen(
        [sys.executable, "experiments/train_ppo.py", *args],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        start_new_session=new_group,  # its own process group, as a terminal's foreground job
    )


def wait_for(predicate, seconds=600):
    deadline = time.time() + seconds
    while time.time() < deadline and not predicate():
        time.sleep(0.2)
    assert predicate(), "timed out"


def test_sigterm_during_start_up_exits_cleanly(tmp_path):
    proc = start(tmp_path, "s")
    # The run folder's config is written first, before envs, the model and the warm start.
    wait_for(lambda: (tmp_path / "policies" / "s" / "config.yaml").is_file())
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted" in stdout


def test_second_sigterm_does_not_break_the_interrupt_save(tmp_path):
    proc = start(tmp_path, "d")
    ckpts = tmp_path / "policies" / "d" / "checkpoints"
    wait_for(lambda: any(int(p.stem.split("_")[1]) > 0 for p in ckpts.glob("model_*.zip")))
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "--resume d" in stdout
    meta = yaml.safe_load((tmp_path / "policies" / "d" / "metadata.yaml").read_text())
    assert meta["in_progress"] is False and meta["interrupted"] is True
    assert (tmp_path / "policies" / "d" / "model.zip").is_file()


def test_ctrl_c_to_the_process_group_with_subprocess_envs(tmp_path):
    extra = ["--set", "vec_env=subproc", "--set", "vine_fraction=0", "--set", "sequences=0"]
    proc = start(tmp_path, "g", extra=extra, new_group=True)
    ckpts = tmp_path / "policies" / "g" / "checkpoints"
    wait_for(lambda: any(int(p.stem.split("_")[1]) > 0 for p in ckpts.glob("model_*.zip")))
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: every process in it
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr and "--resume g" in stdout
    meta = yaml.safe_load((tmp_path / "policies" / "g" / "metadata.yaml").read_text())
    assert meta["in_progress"] is False and meta["interrupted"] is True
    assert (tmp_path / "policies" / "g" / "model.zip").is_file()


def test_closing_subprocess_envs_after_an_interrupt_mid_step_does_not_hang():
    # An interrupt inside SubprocVecEnv.step_wait leaves it "waiting" with some results already
    # read; its own close() then waits for them again, forever. The trainer's close must not.
    import threading

    from crius_gym.env.config import EnvConfig
    from crius_gym.rl.ppo import resolve_hyperparams
    from crius_gym.rl.train import _close_after_interrupt, build_vec_env

    hp = resolve_hyperparams("tiny", overrides=["vec_env=subproc", "vine_fraction=0", "n_envs=2"])
    venv = build_vec_env(hp, "tiny", EnvConfig(**dict(hp.env)), 0)
    venv.reset()
    venv.step_async(np.array([venv.action_space.sample()] * 2))
    venv.remotes[0].recv()  # step_wait got one result when the interrupt arrived
    done = threading.Event()
    closer = threading.Thread(target=lambda: (_close_after_interrupt(venv), done.set()))
    closer.start()
    closer.join(timeout=60)
    assert done.is_set(), "closing after an interrupt hung"
    assert not any(p.is_alive() for p in venv.processes)


def test_sigterm_during_the_guide_margin_selection_keeps_the_trained_policy(tmp_path):
    """Training done, margin selection running: the policy is saved, only the margin is missing."""
    import threading

    # A short run whose margin selection takes a while: many margins, long stress traces.
    extra = ["--set", "deploy_margins=[0,0.5,1,1.5,2,3]", "--set", "deploy_traces=3"]
    extra += ["--set", "deploy_stress_traces=2", "--set", "deploy_stress_jobs=200"]
    proc = start(tmp_path, "m", total="512", extra=extra)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True)
    reader.start()
    wait_for(lambda: any("choosing the guide margin" in line for line in lines))
    proc.send_signal(signal.SIGTERM)
    stderr = proc.stderr.read()
    proc.wait(timeout=300)
    reader.join(timeout=60)
    stdout = "".join(lines)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stderr
    assert "interrupted during the guide-margin selection" in stdout
    assert "select_guide_margin.py --policy" in stdout
    run = tmp_path / "policies" / "m"
    meta = yaml.safe_load((run / "metadata.yaml").read_text())
    assert meta["in_progress"] is False and meta["interrupted"] is False
    assert "deployment" not in meta and meta["timesteps"] >= 512
    assert (run / "model.zip").is_file()


def test_sigkill_leaves_no_rollout_worker_behind(tmp_path):
    """Issue 37, item 6: a trainer killed with SIGKILL cannot stop its rollout workers; they
    notice that their parent is gone and exit (crius_gym/rl/rollout_pool.py)."""
    import psutil

    from crius_gym.rl.rollout_pool import PARENT_POLL_S

    proc = start(tmp_path, "killed", extra=["--set", "rollout_workers=2"])
    trainer = psutil.Process(proc.pid)
    workers: list[psutil.Process] = []

    def two_workers() -> bool:
        workers[:] = trainer.children()
        return len(workers) >= 2 or proc.poll() is not None

    wait_for(two_workers)
    assert proc.poll() is None and len(workers) == 2, proc.communicate()
    proc.kill()
    proc.wait()  # not communicate(): orphaned workers would hold its pipes open
    _, alive = psutil.wait_procs(workers, timeout=20 * PARENT_POLL_S + 10)
    for p in alive:  # do not leave them to the next test either
        p.kill()
    proc.communicate()
    assert not alive, f"rollout workers still alive after the trainer's SIGKILL: {alive}"


@pytest.mark.slow
def test_sigkill_at_three_random_moments_then_resume_gives_the_uninterrupted_weights(tmp_path):
    """Issue 37, item 6: a tiny run killed with SIGKILL three times at random moments (in a
    rollout phase, an update, a checkpoint's write: wherever the draw lands) and resumed each
    time ends with exactly the weights of the same run never stopped; every checkpoint left
    behind loads, and no process of a killed session survives it."""
    import psutil

    from crius_gym.rl import training_state
    from crius_gym.rl.rollout_pool import PARENT_POLL_S
    from tests.rl.test_exact_resume import weights

    extra = ["--set", "checkpoint_freq=256", "--set", "rollout_workers=2"]
    total = "2048"
    t0 = time.time()
    clean = start(tmp_path, "clean", total=total, extra=extra)
    _, err = clean.communicate(timeout=900)
    assert clean.returncode == 0, err
    duration_s = time.time() - t0
    rng = random.Random(37)
    run_dir = tmp_path / "policies" / "killed"
    kills = []
    for session in range(3):
        more = ["--resume", "killed"] if session else []
        args = more if session else extra
        if session:
            proc = subprocess.Popen(
                [sys.executable, "experiments/train_ppo.py", "--out", str(tmp_path), *args],
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
        else:
            proc = start(tmp_path, "killed", total=total, extra=args)
        trainer = psutil.Process(proc.pid)
        time.sleep(rng.uniform(0.3, 0.9) * duration_s)
        if proc.poll() is not None:  # finished before the draw: nothing to kill
            break
        family = [trainer, *trainer.children(recursive=True)]
        proc.kill()
        proc.wait()
        kills.append(sorted(p.name for p in run_dir.glob("checkpoints/*")))
        print(f"session {session} killed; checkpoints left: {kills[-1]}")
        _, alive = psutil.wait_procs(family[1:], timeout=20 * PARENT_POLL_S + 10)
        for p in alive:
            p.kill()
        assert not alive, f"processes of the killed session {session} still alive: {alive}"
        for state in run_dir.glob(f"checkpoints/*{training_state.SUFFIX}"):
            assert training_state.load_state(state)["num_timesteps"] >= 0
    assert kills, "no kill landed inside a run: the draws are too late for this machine"
    res = subprocess.run(
        [sys.executable, "experiments/train_ppo.py", "--out", str(tmp_path), "--resume", "killed"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,
    )
    finished_early = "the run finished" in res.stderr
    assert res.returncode == 0 or finished_early, res.stderr
    assert weights(run_dir / "model.zip") == weights(tmp_path / "policies" / "clean" / "model.zip")
