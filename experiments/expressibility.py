"""Measure how much of a heuristic's decisions the environment can express as single actions.

Runs the heuristic (default: crius) through the Gymnasium env on held-out traces, exactly as the
simulator would run it (crius_gym.rl.agent.HeuristicDriver, stop_at_every_event): every action it
takes is either one env action ("expressed") or applied beside the action space ("external").
Expressibility = expressed / (expressed + external). Each run is also compared job by job with
the heuristic's direct simulator run (parity: the env changes nothing about the dynamics).

Writes --out/expressibility.md and expressibility.csv (one row per trace) with the command, date
and git revision.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from crius_gym.atomic import atomic_path, atomic_write_text
from crius_gym.bundled import list_scenarios
from crius_gym.cli import COUNT, add_data_dir_option, policy_names_help, run_main
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.plugins import make_policy
from crius_gym.provenance import Provenance
from crius_gym.rl.agent import HeuristicDriver
from crius_gym.rl.ppo import _parse_value
from crius_gym.scenarios import load_scenario
from crius_gym.workload.job import Trace


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--scenario",
        nargs="+",
        default=["hetero-64", "crius-testbed", "crius-sim-1280"],
        metavar="NAME",
        help=f"scenarios (known: {', '.join(list_scenarios())}; default: hetero-64 "
        "crius-testbed crius-sim-1280)",
    )
    p.add_argument(
        "--traces",
        choices=["test", "own", "all"],
        default="test",
        help="the synthetic test split, the scenario's own (Arena) trace, or both (default: test)",
    )
    p.add_argument("--max-traces", type=COUNT, help="at most N traces per scenario")
    p.add_argument(
        "--policy",
        default="crius",
        help=policy_names_help("the heuristic", "crius"),
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="EnvConfig override (repeatable), e.g. --env window_jobs=16 or --env guide=null",
    )
    add_data_dir_option(p)
    p.add_argument("--out", default="results", help="output directory (default: results/)")
    return p.parse_args(argv)


def _traces(name: str, which: str, data_dir: str | None, limit: int | None) -> list[Trace]:
    sc = load_scenario(name)
    out: list[Trace] = []
    if which in ("test", "all"):
        out += sc.held_out_traces("test")
    if which in ("own", "all") and sc.workload.trace is not None:
        out.append(sc.own_trace(data_dir))
    return out[:limit] if limit else out


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    prov = Provenance.capture()
    overrides = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"error: --env {item!r} must look like KEY=VALUE")
        overrides[key] = _parse_value(value)
    cfg = EnvConfig(**{**overrides, "stop_at_every_event": True, "max_decisions": 10**12})
    rows = []
    for name in args.scenario:
        sc = load_scenario(name)
        env = CriusEnv(sc, cfg)
        for trace in _traces(name, args.traces, args.data_dir, args.max_traces):
            t0 = time.perf_counter()
            via_env, stats = HeuristicDriver(make_policy(args.policy, scenario=sc)).run(env, trace)
            direct = sc.make_simulator(env.tuner).run(trace, make_policy(args.policy, scenario=sc))
            same = all(
                dataclasses.astuple(a) == dataclasses.astuple(b)
                for a, b in zip(via_env.jobs, direct.jobs, strict=True)
            )
            total = stats.expressed + stats.external
            rows.append(
                {
                    "scenario": name,
                    "trace": trace.name,
                    "jobs": len(trace),
                    "actions": total,
                    "expressed": stats.expressed,
                    "external": stats.external,
                    "expressibility_pct": 100.0 * stats.expressed / total if total else 100.0,
                    "parity": same,
                    "seconds": time.perf_counter() - t0,
                }
            )
            r = rows[-1]
            print(
                f"{name} {trace.name}: {r['expressed']}/{r['actions']} actions expressed "
                f"({r['expressibility_pct']:.2f}%), parity {'yes' if same else 'NO'}, "
                f"{r['seconds']:.1f} s",
                flush=True,
            )
    df = pd.DataFrame(rows)
    out = Path(args.out)
    with atomic_path(out / "expressibility.csv") as tmp:
        df.to_csv(tmp, index=False)
    per = df.groupby("scenario", sort=False).agg(
        traces=("trace", "count"),
        actions=("actions", "sum"),
        expressed=("expressed", "sum"),
        parity=("parity", "all"),
    )
    per["expressibility_pct"] = 100.0 * per["expressed"] / per["actions"].clip(lower=1)
    shown = {
        k: v
        for k, v in dataclasses.asdict(cfg).items()
        if k in overrides
        or k in ("window_jobs", "cells_per_job", "running_jobs", "guide", "guide_hint")
    }
    lines = [
        "# Expressibility: the heuristic's decisions as single env actions",
        "",
        prov.markdown(),
        "",
        f"Heuristic `{args.policy}` run through the env (env settings: "
        + ", ".join(f"`{k}={v}`" for k, v in shown.items())
        + f"), {args.traces} traces. *Expressed*: actions that were one env action; the rest "
        "were applied beside the action space. *Parity*: every job's result equals the "
        "heuristic's direct simulator run.",
        "",
        "| scenario | traces | actions | expressed | expressibility | parity |",
        "|---|---:|---:|---:|---:|---|",
    ]
    for scen, r in per.iterrows():
        lines.append(
            f"| {scen} | {r['traces']} | {r['actions']:,} | {r['expressed']:,} | "
            f"{r['expressibility_pct']:.2f}% | {'yes' if r['parity'] else 'no'} |"
        )
    lines += ["", "Per trace: `expressibility.csv`.", ""]
    atomic_write_text(out / "expressibility.md", "\n".join(lines))
    print(f"wrote {out / 'expressibility.md'}")


if __name__ == "__main__":
    run_main(main)
