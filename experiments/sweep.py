"""Sweep seeds, scenarios and PPO hyperparameters with Ray Tune (the `ray` extra).

Every trial calls the same training function as experiments/train_ppo.py, so each writes the
same TensorBoard logs, checkpoints and saved policy: --out/runs/<sweep>/<trial>/ and
--out/policies/<sweep>/<trial>/. Each validation (every eval_freq timesteps) is reported to Tune;
the metric is the validation average JCT (lower is better). ASHA stops weak trials early.

Examples:
  python experiments/sweep.py --grid seed=0,1,2 --grid learning_rate=1e-4,3e-4
  python experiments/sweep.py --random learning_rate=loguniform:1e-5:1e-3 --num-samples 8 --asha
  python experiments/sweep.py --name my-sweep --resume        # continue an interrupted sweep

Local Ray by default (one trial per CPU). --address joins an existing Ray cluster
(`ray start --head` on one machine, `ray start --address=<head>:6379` on the others); then --out
and --storage must be on storage every node can reach (NFS or an object store), because trials
write their policies where they run and Tune syncs its state there.
"""

from __future__ import annotations

import argparse
import math
import shutil
from pathlib import Path
from typing import Any

from crius_gym.atomic import atomic_write_text
from crius_gym.bundled import list_scenarios
from crius_gym.cli import COUNT, POSITIVE, run_main
from crius_gym.provenance import Provenance
from crius_gym.yamlfile import load_yaml

METRIC = "eval_avg_jct_s"


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--name", default="sweep", help="sweep name (folder names; default: sweep)")
    p.add_argument(
        "--scenario",
        nargs="+",
        default=["hetero-64"],
        help=f"scenario(s), a grid axis; known: {', '.join(list_scenarios())}",
    )
    p.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="grid axis over seed or a hyperparameter (repeatable), "
        "e.g. seed=0,1,2 or env.cells_per_job=4,6",
    )
    p.add_argument(
        "--random",
        action="append",
        default=[],
        metavar="KEY=DIST:A:B",
        help="random axis: uniform:A:B, loguniform:A:B or choice:V1|V2 (repeatable)",
    )
    p.add_argument(
        "--num-samples",
        type=COUNT,
        default=1,
        help="samples of the random axes (each repeated for every grid point)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="fixed hyperparameter override for every trial (repeatable)",
    )
    p.add_argument("--total-timesteps", type=COUNT, help="timesteps per trial (default: config)")
    p.add_argument(
        "--asha", action="store_true", help="stop weak trials early with ASHA on the validation JCT"
    )
    p.add_argument(
        "--grace-timesteps",
        type=COUNT,
        default=40_000,
        help="ASHA: timesteps before a trial may be stopped (default 40000)",
    )
    p.add_argument("--cpus-per-trial", type=POSITIVE, default=1.0, help="CPUs per trial")
    p.add_argument("--address", help="join an existing Ray cluster (default: start a local one)")
    p.add_argument(
        "--storage",
        help="Tune storage path (default: --out/sweeps); shared storage on a multi-node cluster",
    )
    p.add_argument(
        "--out", default="results", help="root of runs/ and policies/ (default: results/)"
    )
    p.add_argument(
        "--resume",
        action="store_true",
        help="continue the sweep --name from its Tune state (unfinished trials resume "
        "from their latest checkpoints)",
    )
    return p.parse_args()


def _value(text: str) -> Any:
    return load_yaml(text, f"--grid/--choice value {text!r}")


def search_space(args: argparse.Namespace) -> dict[str, Any]:
    """Tune's param_space: grid and random axes over keys of the config."""
    from ray import tune

    space: dict[str, Any] = {"scenario": tune.grid_search(list(args.scenario))}
    for item in args.grid:
        key, _, values = item.partition("=")
        space[key] = tune.grid_search([_value(v) for v in values.split(",")])
    for item in args.random:
        key, _, spec = item.partition("=")
        kind, _, rest = spec.partition(":")
        if kind == "choice":
            space[key] = tune.choice([_value(v) for v in rest.split("|")])
        else:
            lo, hi = (float(x) for x in rest.split(":"))
            space[key] = (tune.loguniform if kind == "loguniform" else tune.uniform)(lo, hi)
    return space


def make_trainable(args: argparse.Namespace, prov: dict[str, str]) -> Any:
    """The Tune function trainable: one train_ppo run per trial."""
    out = Path(args.out).resolve()
    fixed = list(args.set)
    total = args.total_timesteps
    name = args.name

    def trainable(config: dict[str, Any]) -> None:
        import torch
        from ray import tune

        from crius_gym.rl.checkpoints import latest_checkpoint
        from crius_gym.rl.ppo import resolve_hyperparams
        from crius_gym.rl.train import TrainSpec, train

        torch.set_num_threads(1)
        trial = tune.get_context().get_trial_name()
        seed = int(config.get("seed", 0))
        overrides = [
            *fixed,
            *(f"{k}={v}" for k, v in config.items() if k not in ("scenario", "seed")),
        ]
        if total:
            overrides.append(f"total_timesteps={total}")
        hp = resolve_hyperparams(config["scenario"], overrides=overrides)
        policy_dir = out / "policies" / name / trial
        spec = TrainSpec(
            run=trial,
            scenario=config["scenario"],
            hyperparams=hp,
            seed=seed,
            policy_dir=policy_dir,
            runs_dir=out / "runs" / name / trial,
            provenance={**prov, "trial_config": str(config)},
            progress=False,
        )

        def report(metrics: dict[str, float], _save_dir: Path) -> None:
            value = metrics["eval_avg_jct_s"]
            if metrics["eval_unfinished"] > 0 or math.isnan(value):
                value = math.inf  # never rank a policy that leaves work unfinished
            tune.report(
                {
                    METRIC: value,
                    "timesteps": metrics["timesteps"],
                    "jct_vs_crius": metrics["eval_jct_vs_ref"],
                    "throughput_vs_crius": metrics["eval_throughput_vs_ref"],
                }
            )

        # A restored trial continues from its checkpoint; one restarted before its first
        # checkpoint starts over in its own folder (nothing in it is worth keeping).
        resume = latest_checkpoint(policy_dir) is not None
        if not resume and policy_dir.exists():
            shutil.rmtree(policy_dir)
        train(spec, resume=resume, on_eval=report, log=lambda _msg: None)

    return trainable


def main() -> None:
    args = parse_args()
    import ray
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    prov = Provenance.capture()
    storage = Path(args.storage or Path(args.out) / "sweeps").resolve()
    # "local": a private instance; Ray would otherwise join $RAY_ADDRESS or a running cluster.
    ray.init(address=args.address or "local", include_dashboard=False, log_to_driver=False)
    trainable = tune.with_resources(
        make_trainable(args, prov.as_dict()), {"cpu": args.cpus_per_trial}
    )
    path = storage / args.name
    if args.resume and tune.Tuner.can_restore(str(path)):
        tuner = tune.Tuner.restore(
            str(path), trainable, resume_unfinished=True, resume_errored=True
        )
    else:
        scheduler = None
        if args.asha:
            scheduler = ASHAScheduler(
                time_attr="timesteps",
                grace_period=args.grace_timesteps,
                max_t=args.total_timesteps or 10**9,
                reduction_factor=2,
            )
        tuner = tune.Tuner(
            trainable,
            param_space=search_space(args),
            tune_config=tune.TuneConfig(
                metric=METRIC, mode="min", num_samples=args.num_samples, scheduler=scheduler
            ),
            run_config=tune.RunConfig(name=args.name, storage_path=str(storage), verbose=1),
        )
    results = tuner.fit()
    frame = results.get_dataframe()
    keep = [
        c
        for c in frame.columns
        if c.startswith("config/")
        or c in (METRIC, "timesteps", "jct_vs_crius", "throughput_vs_crius", "trial_id")
    ]
    frame = frame[keep].sort_values(METRIC)
    lines = [
        f"# Sweep `{args.name}`",
        "",
        prov.markdown(),
        "",
        f"Metric: validation average JCT of the last report (lower is better; trials with "
        f"unfinished jobs rank last). Policies: `{Path(args.out) / 'policies' / args.name}`.",
        "",
        frame.to_markdown(index=False, floatfmt=".4g"),
        "",
    ]
    report = storage / f"{args.name}.md"
    atomic_write_text(report, "\n".join(lines))
    print("\n".join(lines))
    print(f"wrote {report}")
    ray.shutdown()


if __name__ == "__main__":
    run_main(main)
