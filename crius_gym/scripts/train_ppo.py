"""Train a MaskablePPO scheduler (default: on the mixture envs/mix.yaml, < 20 min on 2 CPU cores).

Reads hyperparameters from agents/ppo.yaml (`default` block, then the scenario's block, then
--set overrides), optionally warm-starts by behaviour cloning of the Crius heuristic, trains with
TensorBoard logs (SB3 scalars, `sched/*` metrics of training episodes, `eval/*` validation
against Crius on the same traces), checkpoints regularly, keeps the best model by validation
JCT, and saves the policy with its resolved config, command, package version, git revision and
env id. --resume continues an interrupted run, even one killed outright (SIGKILL, a lost node),
exactly as it would have gone on: each checkpoint carries the run's training state
(crius_gym/rl/checkpoints.py). Ctrl-C (or SIGTERM) saves the weights before exiting.

Outputs: --out/runs/<run>/ (TensorBoard) and --out/policies/<run>/ (model.zip, best_model.zip,
checkpoints/, evaluations.csv, config.yaml, metadata.yaml).
"""

from __future__ import annotations

import argparse
import datetime as dt
import signal
from pathlib import Path

from crius_gym.bundled import agents_dir, list_scenarios
from crius_gym.cli import COUNT, SEED, run_main
from crius_gym.errors import InputFileError
from crius_gym.provenance import Provenance

# torch, the RL code and the simulator are imported in main(): --help answers at once.


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--scenario",
        default="mix",
        help=f"scenario (a name or a YAML file) to train on; known: {', '.join(list_scenarios())} "
        "(default: mix, the training mixture)",
    )
    p.add_argument(
        "--total-timesteps",
        type=COUNT,
        help="env decisions to train for (default: from agents/ppo.yaml)",
    )
    p.add_argument("--seed", type=SEED, default=0, help="seed of PPO, the envs and the warm start")
    p.add_argument("--out", default="results", help="root of the run folders (default: results/)")
    p.add_argument(
        "--run-name", help="name of the run folder (default: scenario, policy, seed and time)"
    )
    p.add_argument(
        "--resume",
        metavar="RUN",
        help="continue an interrupted or killed run (its name, or its policies/<run> folder) "
        "from its latest checkpoint with a training state (exactly as if never stopped), "
        "with its saved config",
    )
    p.add_argument(
        "--config",
        default=str(agents_dir() / "ppo.yaml"),
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
    p.add_argument("--n-envs", type=COUNT, help="parallel envs (default: from the config)")
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a hyperparameter (repeatable), e.g. --set n_steps=256 or "
        "--set env.reconfigure=true",
    )
    p.add_argument(
        "--rollout-backend",
        choices=["process", "ray"],
        default="process",
        help="where the vine's rollouts run: process = rollout_workers worker processes on "
        "this machine (default); ray = rollout_workers Ray actors, on a private local Ray "
        "instance or, with --address, on a Ray cluster (needs the ray extra). Same seed, same "
        "weights on either: docs/distributed.md",
    )
    p.add_argument(
        "--address",
        metavar="HOST:PORT",
        help="with --rollout-backend ray: the Ray cluster to run the rollouts on (its head's "
        "address, or 'auto'); default: a private local instance",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = p.parse_args()
    if args.address and args.rollout_backend != "ray":
        p.error("--address needs --rollout-backend ray")
    return args


def _interrupt(signum: int, frame: object) -> None:
    # One interrupt is enough: a second one must not break the checkpoint being saved.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def main() -> None:
    args = parse_args()
    import torch

    from crius_gym.rl.ppo import resolve_hyperparams
    from crius_gym.rl.train import TrainSpec, train
    from crius_gym.scenarios import load_scenario

    # SIGTERM (a scheduler's stop, `kill`) and SIGINT take the Ctrl-C path: save, then exit.
    # SIGINT is set explicitly because a shell starts background jobs with it ignored.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    torch.set_num_threads(1)  # small networks: threads only contend with the envs
    prov = Provenance.capture()
    out = Path(args.out)
    if args.resume:  # a resumed run reuses its saved config
        policy_dir = Path(args.resume)
        if not policy_dir.is_dir():
            policy_dir = out / "policies" / args.resume
        if not (policy_dir / "config.yaml").is_file():
            raise InputFileError(policy_dir / "config.yaml", "no run to resume here")
        spec = TrainSpec.from_saved(
            policy_dir,
            out / "runs" / policy_dir.name,
            prov.as_dict(),
            args.total_timesteps,
            not args.no_progress,
        )
    else:
        overrides = list(args.set)
        for key, value in (
            ("total_timesteps", args.total_timesteps),
            ("policy", args.policy),
            ("warm_start", args.warm_start),
            ("n_envs", args.n_envs),
        ):
            if value is not None:
                overrides.append(f"{key}={value}")
        # The block is the scenario's name, also when the scenario is given as a file.
        hp = resolve_hyperparams(load_scenario(args.scenario).name, args.config, overrides)
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        run = args.run_name or f"{Path(args.scenario).stem}_{hp.policy}_s{args.seed}_{stamp}"
        spec = TrainSpec(
            run=run,
            scenario=args.scenario,
            hyperparams=hp,
            seed=args.seed,
            policy_dir=out / "policies" / run,
            runs_dir=out / "runs" / run,
            provenance=prov.as_dict(),
            progress=not args.no_progress,
        )
    scenario = load_scenario(spec.scenario)
    hp = spec.hyperparams
    if scenario.mix:
        sizes = [comp.cluster.num_gpus for comp, _ in scenario.mix]
        where = f"{len(sizes)} components, {min(sizes)}-{max(sizes)} GPUs"
    else:
        where = f"{scenario.cluster.num_gpus} GPUs"
    print(
        f"run {spec.run}: {scenario.name} ({where}), policy "
        f"{hp.policy}, {hp.total_timesteps} timesteps, {hp.n_envs} envs, seed {spec.seed}",
        flush=True,
    )
    try:
        outcome = train(
            spec,
            resume=bool(args.resume),
            log=lambda msg: print(msg, flush=True),
            rollout_backend=args.rollout_backend,
            ray_address=args.address,
        )
    except KeyboardInterrupt:  # during start-up: train() said what was kept
        raise SystemExit(130) from None
    print(
        f"saved {outcome.model_path} (best by validation JCT: {outcome.best_path}); "
        f"TensorBoard: tensorboard --logdir {spec.runs_dir}"
    )
    if outcome.interrupted:
        print(f"continue with --resume {spec.run}", flush=True)
        raise SystemExit(130)
    if outcome.margin_interrupted:  # stopped on request, as a Ctrl-C should: status 130
        raise SystemExit(130)


def cli() -> None:
    """Console-script entry point (errors on bad input exit with status 2)."""
    run_main(main)


if __name__ == "__main__":
    cli()
