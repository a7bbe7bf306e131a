"""Hindsight against present rollout labels, on the same decisions of held-out traces.

Runs Crius (the env's guide) on each scenario's held-out traces and, at every --every-th decision
where the agent has a choice, evaluates every valid env action twice, with Crius taking over
after it: on the episode's trace (hindsight: the arrivals still to come included, today's vine
labels) and on a copy holding only the jobs already arrived (present: the lookahead scheduler's
label restricted to the env's actions, a function of the state). Reports how often the two labels
agree, how often each departs from Crius, what the present label is worth judged by hindsight
(Σ JCT saved against Crius's action with the future that did arrive; the hindsight label's gain
is the most any label can save there), and the wall time of each kind per labelled decision.

Writes --out/labels.md and labels.csv (one row per labelled decision) with the command, date and
git revision.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from crius_gym.atomic import atomic_path
from crius_gym.cli import COUNT
from crius_gym.env.config import EnvConfig
from crius_gym.eval.labels import compare_labels
from crius_gym.provenance import Provenance
from crius_gym.scenarios import load_scenario
from crius_gym.stats import mean_ci


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--scenario",
        nargs="+",
        default=["hetero-64"],
        help="scenario names or files (plain scenarios, not mixtures); default hetero-64",
    )
    p.add_argument(
        "--split", choices=["val", "test"], default="val", help="held-out split (default val)"
    )
    p.add_argument("--traces", type=COUNT, default=4, help="first N traces of the split (4)")
    p.add_argument(
        "--every", type=COUNT, default=5, help="label one decision with a choice in N (5)"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/tmp/labels-<time>/)",
    )
    p.add_argument("--force", action="store_true", help="replace existing outputs")
    args = p.parse_args(argv)
    prov = Provenance.capture()
    out = args.out or Path("results/tmp") / f"labels-{time.strftime('%Y%m%d-%H%M%S')}"
    report, table = out / "labels.md", out / "labels.csv"
    if not args.force and (report.exists() or table.exists()):
        p.error(f"{report} exists (use --force to replace it)")
    frames = []
    for name in args.scenario:
        scenario = load_scenario(name)
        t0 = time.perf_counter()
        pairs = compare_labels(scenario, EnvConfig(), args.split, range(args.traces), args.every)
        df = pd.DataFrame([dataclasses.asdict(x) for x in pairs])
        df.insert(0, "scenario", name)
        frames.append(df)
        print(f"{name}: {len(df)} decisions labelled ({time.perf_counter() - t0:.0f} s)")
    df = pd.concat(frames, ignore_index=True)
    lines = [
        "# Rollout labels: hindsight against the jobs present",
        "",
        prov.markdown(),
        "",
        "Crius runs each held-out trace through the env (its default settings); at every "
        f"{args.every}th decision with a choice every valid action is rolled out with Crius "
        "taking over, once on the episode's trace (hindsight, today's vine labels: arrivals "
        "still to come included) and once over the jobs already arrived, priced by the "
        "estimator (present: the lookahead's label, `CriusEnv.rollout_cost(a, future=False)`). "
        "A label is the cheapest action, Crius's on ties. *Gain by hindsight* is Σ JCT a label "
        "saves against Crius's action, judged on the future that did arrive, per labelled "
        "decision (mean ± 95% CI over decisions); the hindsight label's gain is the most any "
        "label can save there. *Share captured* = present gain / hindsight gain.",
        "",
        "| scenario | split | traces | decisions | actions / decision | labels agree "
        "| hindsight ≠ Crius | present ≠ Crius | hindsight gain (s) | present gain (s) "
        "| share captured | present worse than Crius | ms / label: hindsight | present |",
        "| --- " * 14 + "|",
    ]
    for name, g in df.groupby("scenario", sort=False):
        hm, hci = mean_ci(g["hindsight_gain_s"].to_numpy())
        pm, pci = mean_ci(g["present_gain_s"].to_numpy())
        not_guide_p = g["present"] != g["guide"]
        lines.append(
            f"| {name} | {args.split} | {g['trace'].nunique()} | {len(g)} | "
            f"{g['actions'].mean():.1f} | {100 * (g['hindsight'] == g['present']).mean():.1f}% | "
            f"{100 * (g['hindsight'] != g['guide']).mean():.1f}% | "
            f"{100 * not_guide_p.mean():.1f}% | {hm:.0f} ± {hci:.0f} | {pm:.0f} ± {pci:.0f} | "
            f"{pm / hm if hm else np.nan:.2f} | "
            f"{100 * (g['present_gain_s'] < 0).mean():.1f}% | "
            f"{1000 * g['hindsight_s'].mean():.0f} | {1000 * g['present_s'].mean():.0f} |"
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
