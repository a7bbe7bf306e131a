"""Expert iteration: rounds of vine training, each labelled by the previous round's network.

Round 0 trains with Crius as the rollout policy (or, with --start-from, takes an already trained
policy as round 0 without training it). Every later round trains with the best kept network so
far as the rollout policy of the vine labels (its branches stepped in lockstep, batched through
the network; truncated --horizon-s simulated seconds after the decision and valued by a list
schedule) and as its initial weights. Labels are present labels: rollouts hold only the jobs
already arrived, so a label is a function of the state. Every round is the bare network: no
guide margin and no envelope are selected.

After each round the bare network (masked argmax, no margin, no envelope) runs on the first
--val-traces validation traces of every --val-scenarios scenario; its score is the mean over
scenarios of the mean per-trace JCT ratio to Crius. A round is kept only if it beats the best
kept round by more than --tolerance; the next round then rolls out with it.

Resumable: each round's training resumes from its checkpoint (train_ppo.py --resume), and the
rounds finished are recorded in --out/<name>/expert_iteration.yaml (an interrupted driver goes
on at the first unfinished round; rerun the same command). Writes --out/<name>/
expert_iteration.md and .csv (one row per round) with the command and git revision; the run
folders are --out/policies/<name>-r<k>/.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from crius_gym.atomic import atomic_write_text
from crius_gym.cli import COUNT, NONNEG, POSITIVE, SEED, run_main
from crius_gym.provenance import Provenance
from crius_gym.yamlfile import load_yaml_file

if TYPE_CHECKING:  # the RL stack is imported in main(): --help answers at once
    from crius_gym.rl.expert_iteration import IterationLog


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--name", default="ei", help="name of this iteration run (default: ei)")
    p.add_argument("--rounds", type=COUNT, default=3, help="rounds in all, round 0 included")
    p.add_argument("--scenario", default="mix", help="training scenario (default: mix)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of every round's training")
    p.add_argument(
        "--total-timesteps", type=COUNT, help="timesteps per round (default: agents/ppo.yaml)"
    )
    p.add_argument(
        "--horizon-s",
        type=POSITIVE,
        default=None,
        help="truncate the network's rollouts this many simulated seconds after the decision "
        "(default: none, rollouts to the end of the jobs present)",
    )
    p.add_argument(
        "--start-from",
        metavar="POLICY",
        help="a trained policy (folder or .zip) taken as round 0 instead of training one",
    )
    p.add_argument(
        "--val-scenarios",
        nargs="+",
        default=["hetero-64", "crius-testbed", "crius-sim-1280-crowd"],
        help="validation scenarios of the keep rule, each weighing the same (default: hetero-64 "
        "crius-testbed crius-sim-1280-crowd; the crowded 1,280-GPU set is the one that ranks "
        "policies as the Arena Philly trace does, docs/rl.md §2)",
    )
    p.add_argument(
        "--val-traces", type=COUNT, default=4, help="validation traces per scenario (default: 4)"
    )
    p.add_argument(
        "--tolerance",
        type=NONNEG,
        default=0.002,
        help="a round is kept when its score is lower than the best kept by more than this",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="hyperparameter override for every round (repeatable), as train_ppo.py --set",
    )
    p.add_argument(
        "--out",
        default="results/tmp/expert-iteration",
        help="root of the run folders and the report (default: results/tmp/expert-iteration)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the training progress bars")
    args = p.parse_args(argv)
    return args


def _finished(policy_dir: Path) -> bool:
    meta = policy_dir / "metadata.yaml"
    if not meta.is_file():
        return False
    data = load_yaml_file(meta) or {}
    return data.get("in_progress") is False and not data.get("interrupted")


def _train(args: argparse.Namespace, run: str, overrides: list[str]) -> float:
    """Train (or resume) one round's run; its wall time in seconds."""
    out = Path(args.out)
    policy_dir = out / "policies" / run
    if not _finished(policy_dir):
        cmd = [sys.executable, "-m", "crius_gym.scripts.train_ppo", "--out", str(out)]
        if (policy_dir / "config.yaml").is_file():
            cmd += ["--resume", run]
        else:
            cmd += ["--scenario", args.scenario, "--run-name", run, "--seed", str(args.seed)]
            if args.total_timesteps:
                cmd += ["--total-timesteps", str(args.total_timesteps)]
            for item in [*args.set, *overrides]:
                cmd += ["--set", item]
        if args.no_progress:
            cmd.append("--no-progress")
        print(f"  $ {' '.join(cmd)}", flush=True)
        done = subprocess.run(cmd, check=False)
        if done.returncode != 0:
            raise SystemExit(f"round {run}: training exited with {done.returncode}")
    meta = load_yaml_file(policy_dir / "metadata.yaml") or {}
    return float(meta.get("train_seconds") or 0.0)


def _report(args: argparse.Namespace, log: IterationLog, folder: Path, prov: Provenance) -> None:
    rows = []
    for r in log.rounds:
        rows.append(
            {
                "round": r.index,
                "run": r.run,
                "rollout_policy": r.rollout_policy or "crius",
                **{f"jct_ratio_{k}": round(v, 4) for k, v in r.per_scenario.items()},
                "score": round(r.score, 4),
                "kept": r.kept,
                "train_s": r.train_seconds,
            }
        )
    table = pd.DataFrame(rows)
    atomic_write_text(folder / "expert_iteration.csv", table.to_csv(index=False))
    best = log.best
    lines = [
        "# Expert iteration: the bare network against Crius, round by round",
        "",
        prov.markdown(),
        "",
        "Each round's network is run with no guide margin and no envelope on the first "
        f"{args.val_traces} validation traces of {', '.join(args.val_scenarios)}; a figure is the "
        "mean per-trace ratio of its average JCT to Crius's (lower is better), the score their "
        f"mean. A round is kept when it beats the best kept round by more than {args.tolerance}; "
        "the next round rolls out with the best kept network"
        + (
            f", truncated {args.horizon_s:g} s after the decision."
            if args.horizon_s
            else ", to the end of the jobs present."
        ),
        "",
        table.to_markdown(index=False),
        "",
        f"Best kept: {best.run} ({best.model}), score {best.score:.4f}."
        if best
        else "No round kept.",
        "",
    ]
    atomic_write_text(folder / "expert_iteration.md", "\n".join(lines))


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    from crius_gym.rl.expert_iteration import (
        IterationLog,
        RoundRecord,
        bare_validation,
        keep_round,
        mean_score,
        round_overrides,
    )
    from crius_gym.rl.saved import policy_file

    prov = Provenance.capture(argv)
    folder = Path(args.out) / args.name
    settings = {
        k: getattr(args, k)
        for k in (
            "scenario",
            "seed",
            "total_timesteps",
            "horizon_s",
            "start_from",
            "val_scenarios",
            "val_traces",
            "tolerance",
            "set",
        )
    }
    log = IterationLog.open(folder / "expert_iteration.yaml", settings)
    for k in range(len(log.rounds), args.rounds):
        best = log.best
        previous = Path(best.model) if best else None
        run = f"{args.name}-r{k}"
        print(
            f"round {k}/{args.rounds - 1}: rollout policy {previous if previous else 'crius'}",
            flush=True,
        )
        if k == 0 and args.start_from:
            model, seconds, run = policy_file(args.start_from), 0.0, str(args.start_from)
        else:
            seconds = _train(args, run, round_overrides(previous, args.horizon_s))
            model = policy_file(Path(args.out) / "policies" / run)
        per = bare_validation(
            model, args.val_scenarios, args.val_traces, log=lambda m: print(m, flush=True)
        )
        score = mean_score(per)
        kept = keep_round(score, best.score if best else None, args.tolerance)
        log.add(
            RoundRecord(
                k, run, str(model), str(previous) if previous else None, per, score, kept, seconds
            )
        )
        print(f"round {k}: score {score:.4f} ({'kept' if kept else 'not kept'})", flush=True)
        _report(args, log, folder, prov)
    _report(args, log, folder, prov)
    print(f"wrote {folder / 'expert_iteration.md'}", flush=True)


def cli() -> None:
    """Console entry point."""
    run_main(main)


if __name__ == "__main__":
    cli()
