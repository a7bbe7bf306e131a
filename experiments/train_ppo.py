"""Train a MaskablePPO scheduler on a scenario (default: hetero-64, < 20 min on 2 CPU cores).

Reads hyperparameters from agents/ppo.yaml (`default` block, then the scenario's block, then
--set overrides), optionally warm-starts by behaviour cloning of the Crius heuristic, trains with
TensorBoard logs (SB3 scalars, `sched/*` metrics of training episodes, `eval/*` validation
against Crius on the same traces), checkpoints regularly, keeps the best model by validation
JCT, and saves the policy with its resolved config, command, package version, git revision and
env id. --resume continues an interrupted run; Ctrl-C saves a checkpoint before exiting.

Outputs: --out/runs/<run>/ (TensorBoard) and --out/policies/<run>/ (model.zip, best_model.zip,
checkpoints/, evaluations.csv, config.yaml, metadata.yaml).
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

import torch
import yaml
from sb3_contrib import MaskablePPO
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv

from crius_gym.atomic import atomic_path, atomic_write_text
from crius_gym.cli import run_main
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.eval.runs import run_policies
from crius_gym.provenance import Provenance
from crius_gym.rl.callbacks import (
    EPISODE_KEYS,
    CheckpointCallback,
    ProgressCallback,
    SchedMetricsCallback,
    ValidationCallback,
    latest_checkpoint,
)
from crius_gym.rl.imitation import behaviour_clone, collect_demonstrations
from crius_gym.rl.ppo import DEFAULT_AGENTS_FILE, PPOHyperparams, make_model, resolve_hyperparams
from crius_gym.rl.saved import write_metadata
from crius_gym.sim.scenario import list_scenarios, load_scenario


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--scenario",
        default="hetero-64",
        help=f"scenario to train on; known: {', '.join(list_scenarios())} (default: hetero-64)",
    )
    p.add_argument(
        "--total-timesteps",
        type=int,
        help="env decisions to train for (default: from agents/ppo.yaml)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of PPO, the envs and the warm start")
    p.add_argument("--out", default="results", help="root of the run folders (default: results/)")
    p.add_argument(
        "--run-name", help="name of the run folder (default: scenario, policy, seed and time)"
    )
    p.add_argument(
        "--resume",
        metavar="RUN",
        help="continue an interrupted run (its name, or its policies/<run> folder) "
        "from its latest checkpoint, with its saved config",
    )
    p.add_argument(
        "--config",
        default=str(DEFAULT_AGENTS_FILE),
        help="agent hyperparameter file (default: agents/ppo.yaml)",
    )
    p.add_argument(
        "--policy",
        choices=["rowwise", "mlp"],
        help="policy network: rowwise (shared-weight job x Cell scorer) or mlp "
        "(default: from the config)",
    )
    p.add_argument(
        "--warm-start",
        choices=["none", "crius"],
        help="behaviour-clone the Crius heuristic before PPO (default: from the config)",
    )
    p.add_argument("--n-envs", type=int, help="parallel envs (default: from the config)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a hyperparameter (repeatable), e.g. --set n_steps=256 or "
        "--set env.reconfigure=true",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    return p.parse_args()


def make_env_fn(scenario: str, env_cfg: EnvConfig):  # type: ignore[no-untyped-def]
    def _make() -> Monitor:
        return Monitor(CriusEnv(scenario, env_cfg), info_keywords=EPISODE_KEYS)

    return _make


def build_vec_env(hp: PPOHyperparams, scenario: str, env_cfg: EnvConfig, seed: int) -> VecEnv:
    fns = [make_env_fn(scenario, env_cfg) for _ in range(hp.n_envs)]
    venv: VecEnv = SubprocVecEnv(fns) if hp.vec_env == "subproc" else DummyVecEnv(fns)
    venv.seed(seed)
    return venv


def main() -> None:
    args = parse_args()
    torch.set_num_threads(1)  # small networks: threads only contend with the envs
    prov = Provenance.capture()
    out = Path(args.out)

    # --- configuration (a resumed run reuses its saved config) ---------------------------
    if args.resume:
        policy_dir = Path(args.resume)
        if not policy_dir.is_dir():
            policy_dir = out / "policies" / args.resume
        saved = yaml.safe_load((policy_dir / "config.yaml").read_text())
        run = policy_dir.name
        scenario_name, seed = saved["scenario"], saved["seed"]
        hp = PPOHyperparams(**saved["hyperparams"])
        if args.total_timesteps:
            hp = PPOHyperparams(**{**hp.as_dict(), "total_timesteps": args.total_timesteps})
    else:
        scenario_name, seed = args.scenario, args.seed
        overrides = list(args.set)
        for key, value in (
            ("total_timesteps", args.total_timesteps),
            ("policy", args.policy),
            ("warm_start", args.warm_start),
            ("n_envs", args.n_envs),
        ):
            if value is not None:
                overrides.append(f"{key}={value}")
        hp = resolve_hyperparams(scenario_name, args.config, overrides)
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        run = args.run_name or f"{scenario_name}_{hp.policy}_s{seed}_{stamp}"
        policy_dir = out / "policies" / run
    runs_dir = out / "runs" / run
    policy_dir.mkdir(parents=True, exist_ok=True)
    runs_dir.mkdir(parents=True, exist_ok=True)
    scenario = load_scenario(scenario_name)
    env_cfg = EnvConfig(**dict(hp.env))
    print(
        f"run {run}: {scenario.name} ({scenario.cluster.num_gpus} GPUs), policy {hp.policy}, "
        f"{hp.total_timesteps} timesteps, {hp.n_envs} envs, seed {seed}",
        flush=True,
    )
    atomic_write_text(
        policy_dir / "config.yaml",
        yaml.safe_dump(
            {
                "scenario": scenario.name,
                "seed": seed,
                "hyperparams": hp.as_dict(),
                "command": prov.command,
            },
            sort_keys=False,
        ),
    )

    # --- environments and model ------------------------------------------------------------
    venv = build_vec_env(hp, scenario.name, env_cfg, seed)
    eval_env = CriusEnv(scenario, env_cfg)
    ckpt = latest_checkpoint(policy_dir) if args.resume else None
    warm: dict[str, float] = {}
    if ckpt is not None:
        model = MaskablePPO.load(ckpt, env=venv, device="cpu", tensorboard_log=str(runs_dir))
        print(f"resuming from {ckpt} at {model.num_timesteps} timesteps", flush=True)
    else:
        model = make_model(hp, venv, seed, str(runs_dir))
        if hp.warm_start == "crius":
            t0 = time.perf_counter()
            demos = collect_demonstrations(eval_env, "crius", hp.bc_episodes, hp.gamma, seed)
            warm = behaviour_clone(model, demos, hp.bc_epochs, hp.batch_size, seed)
            warm.update(
                demonstrations=len(demos),
                unlabelled=demos.skipped,
                seconds=time.perf_counter() - t0,
            )
            print(
                f"warm start: {len(demos)} Crius decisions, accuracy "
                f"{warm['bc_accuracy']:.2f}, {warm['seconds']:.0f} s",
                flush=True,
            )

    # --- validation reference: Crius on the same validation traces ---------------------------
    val = scenario.held_out_traces("val", eval_env.tuner)[: hp.eval_traces]
    reference = run_policies(
        scenario, val, ["crius"], seed=seed, tuner=eval_env.tuner, progress=False
    )
    validation = ValidationCallback(eval_env, val, reference, hp.eval_freq, policy_dir)
    checkpoints = CheckpointCallback(hp.checkpoint_freq, policy_dir)
    callbacks = [
        SchedMetricsCallback(),
        validation,
        checkpoints,
        ProgressCallback(hp.total_timesteps, not args.no_progress),
    ]

    # --- train ---------------------------------------------------------------------------------
    t0 = time.perf_counter()
    remaining = max(0, hp.total_timesteps - model.num_timesteps)
    interrupted = False
    try:
        model.learn(
            remaining, callback=callbacks, tb_log_name="ppo", reset_num_timesteps=ckpt is None
        )
    except KeyboardInterrupt:
        interrupted = True
        path = checkpoints.save_now()
        print(
            f"\ninterrupted: checkpoint saved to {path}; continue with --resume {run}", flush=True
        )
    wall = time.perf_counter() - t0

    # --- save ---------------------------------------------------------------------------------
    with atomic_path(policy_dir / "model.zip") as tmp:
        model.save(tmp)
    write_metadata(
        policy_dir,
        eval_env,
        {
            **prov.as_dict(),
            "run": run,
            "seed": seed,
            "policy": hp.policy,
            "timesteps": int(model.num_timesteps),
            "interrupted": interrupted,
            "train_seconds": round(wall, 1),
            "warm_start": warm,
            "best_validation": {"unfinished": validation.best[0], "avg_jct_s": validation.best[1]},
            "tensorboard": str(runs_dir),
        },
    )
    print(
        f"saved {policy_dir / 'model.zip'} (best by validation JCT: "
        f"{policy_dir / 'best_model.zip'}); TensorBoard: tensorboard --logdir {runs_dir}"
    )
    if interrupted:
        raise SystemExit(130)


if __name__ == "__main__":
    run_main(main)
