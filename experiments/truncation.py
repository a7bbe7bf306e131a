"""Truncated against full rollouts of a network policy: how often the label changes.

Runs a saved policy (the bare network, masked argmax) on held-out traces and, at every --every-th
decision with a choice, values every valid action by rollouts in which the network decides the
rest (expert iteration's labels, `crius_gym/rl/network_rollouts.py`), once to the end of the jobs
present and once truncated at each --horizons-s with each --tails (how the rest is valued).
Reports the share of decisions whose best action is unchanged (the target is at least 95%), the
share whose truncated label is as cheap as the full one by full rollouts (a tie counts), the JCT
a truncated label loses against the full one (judged by full rollouts), the full label's gain
over the network's own action, and the wall time per decision of each. E.g.

    python experiments/truncation.py --policy results/reference_policy --scenario hetero-64 \
        --tails list upgrade

Writes --out/truncation.md and truncation.csv with the command, date and git revision.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import pandas as pd

from crius_gym.atomic import atomic_path
from crius_gym.cli import COUNT, POSITIVE
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.eval.truncation import audit_truncation
from crius_gym.provenance import Provenance
from crius_gym.rl.network_rollouts import TAILS
from crius_gym.rl.saved import load_policy, policy_file, read_metadata
from crius_gym.scenarios import load_scenario
from crius_gym.stats import mean_ci


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--policy", type=Path, required=True, help="a saved policy (.zip or folder)")
    p.add_argument(
        "--scenario",
        nargs="+",
        default=["hetero-64"],
        help="scenario names or files (plain scenarios, not mixtures); default hetero-64",
    )
    p.add_argument(
        "--split", choices=["val", "test"], default="val", help="held-out split (default val)"
    )
    p.add_argument("--traces", type=COUNT, default=2, help="first N traces of the split (2)")
    p.add_argument(
        "--every", type=COUNT, default=5, help="value one decision with a choice in N (5)"
    )
    p.add_argument(
        "--horizons-s",
        type=POSITIVE,
        nargs="+",
        default=[1800.0, 7200.0, 28800.0],
        help="truncation horizons in simulated seconds (1800 7200 28800)",
    )
    p.add_argument(
        "--tails",
        nargs="+",
        choices=TAILS,
        default=["upgrade"],
        help="how a truncated rollout values the rest: list (waiting jobs start in queue order "
        "as GPUs free, nobody moves), upgrade (the list schedule with Crius's upgrades of "
        "running jobs onto idle GPUs), speed (the rest at current speeds, no queueing); each "
        "tail with each horizon (default: upgrade, the expert-iteration rollouts' tail)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/tmp/truncation-<time>/)",
    )
    p.add_argument("--force", action="store_true", help="replace existing outputs")
    args = p.parse_args(argv)
    prov = Provenance.capture()
    out = args.out or Path("results/tmp") / f"truncation-{time.strftime('%Y%m%d-%H%M%S')}"
    report, table = out / "truncation.md", out / "truncation.csv"
    if not args.force and (report.exists() or table.exists()):
        p.error(f"{report} exists (use --force to replace it)")
    path = policy_file(args.policy)
    config = EnvConfig(**dict(read_metadata(path).get("env_config") or {}))
    scenarios = [load_scenario(name) for name in args.scenario]
    model, _ = load_policy(path, CriusEnv(scenarios[0], config))
    records = []
    for name, scenario in zip(args.scenario, scenarios, strict=True):
        t0 = time.perf_counter()
        rows = audit_truncation(
            model,
            config,
            scenario,
            args.split,
            range(args.traces),
            args.every,
            args.horizons_s,
            args.tails,
        )
        for r in rows:
            rec = {
                "scenario": name,
                "trace": r.trace,
                "decision": r.decision,
                "actions": r.actions,
                "own": r.own,
                "full": r.full,
                "full_is_wait": r.wait,
                "full_gain_s": r.full_gain_s,
                "full_s": r.full_s,
            }
            for key in r.truncated:
                tag = f"{key[0]}_{key[1]:g}"
                rec[f"label_{tag}"] = r.truncated[key]
                rec[f"lost_s_{tag}"] = r.lost_s[key]
                rec[f"seconds_{tag}"] = r.truncated_s[key]
            records.append(rec)
        print(f"{name}: {len(rows)} decisions valued ({time.perf_counter() - t0:.0f} s)")
    df = pd.DataFrame(records)
    lines = [
        "# Network rollouts: truncated against full",
        "",
        prov.markdown(),
        "",
        f"Policy `{args.policy}` (bare network) runs each held-out trace; at every "
        f"{args.every}th decision with a choice every valid action is valued by rollouts over the "
        "jobs present with the network deciding the rest: to the end (*full*) and truncated at "
        "each horizon, the rest valued by the tail (`list`: waiting jobs start in queue order as "
        "GPUs free, nobody moves; `upgrade`: the same with Crius's upgrades of running jobs onto "
        "idle GPUs; `speed`: the rest at current speeds). *Same best*: the truncated label is "
        "the full one (target ≥ 95%). *As cheap*: the truncated label costs no more than the "
        "full one by full rollouts (ties count: actions whose rollouts end in the same "
        "schedule). *Lost*: Σ JCT (by full rollouts) the truncated label costs against the "
        "full one, per decision (mean ± 95% CI); *full gain*: what the full label saves "
        "against the network's own action.",
        "",
        "| scenario | decisions | actions / decision | full label ≠ own | full gain (s) "
        "| ms / decision full | tail | horizon (s) | same best | as cheap | lost (s) "
        "| ms / decision |",
        "| --- " * 12 + "|",
    ]
    if df.empty:
        lines.append("| (no decision with a choice) |" + " |" * 11)
    for name, g in df.groupby("scenario", sort=False):
        gm, gci = mean_ci(g["full_gain_s"].to_numpy())
        head = (
            f"| {name} | {len(g)} | {g['actions'].mean():.1f} | "
            f"{100 * (g['full'] != g['own']).mean():.1f}% | {gm:.0f} ± {gci:.0f} | "
            f"{1000 * g['full_s'].mean():.0f}"
        )
        keys = [(t, h) for t in args.tails for h in args.horizons_s]
        for i, (t, h) in enumerate(keys):
            tag = f"{t}_{h:g}"
            lost = g[f"lost_s_{tag}"].to_numpy()
            lm, lci = mean_ci(lost)
            lead = head if i == 0 else "| | | | | |"
            lines.append(
                f"{lead} | {t} | {h:g} | {100 * (g[f'label_{tag}'] == g['full']).mean():.1f}% | "
                f"{100 * (lost <= 0).mean():.1f}% | {lm:.0f} ± {lci:.0f} | "
                f"{1000 * g[f'seconds_{tag}'].mean():.0f} |"
            )
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(table) as tmp:
        df.to_csv(tmp, index=False)
    with atomic_path(report) as tmp:
        tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {report} and {table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
