"""Measure the lookahead scheduler (crius-lookahead) against Crius: JCT, throughput, latency.

Runs Crius and crius-lookahead (with the options of --set, over the registered defaults) on each
scenario's held-out test traces and/or its own Arena trace, and writes a paired comparison: per
trace the average-JCT and throughput ratios to Crius, with the mean and its 95% confidence
interval over the traces, and the lookahead's cost per decision (mean and p99 milliseconds of
wall time per simulator decision, audit rollouts left out), how often it departed from Crius's
action and how many rollouts it ran. With --audit K it also measures the bias of truncated
rollouts: every K-th choice it rolls every candidate out to the end as well, and reports the
share of audited choices whose best candidate is the same both ways, and the gain lost: Σ over
audited choices of what the truncated choice costs by full rollouts above the best candidate, as
a share of what the best candidate saves against the rollout policy's own action.

Writes --out/lookahead.md and lookahead.csv (one row per scenario and trace) with the command,
date and git revision.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crius_gym.atomic import atomic_path
from crius_gym.cli import COUNT, NONNEG_INT, key_values
from crius_gym.policies.lookahead import LookaheadOptions, LookaheadPolicy
from crius_gym.policies.registry import make_policy
from crius_gym.provenance import Provenance
from crius_gym.scenarios import load_scenario
from crius_gym.sim.actions import Action
from crius_gym.sim.policy import Policy
from crius_gym.sim.simulator import Simulator
from crius_gym.stats import mean_ci


class TimedLookahead(LookaheadPolicy):
    """The lookahead, timing each decision and optionally auditing truncated rollouts."""

    def __init__(
        self, options: LookaheadOptions, audit_every: int = 0, base: Policy | None = None
    ) -> None:
        super().__init__(options, base=base)
        self.times_s: list[float] = []
        self.audit_every = audit_every
        self.audited = 0
        self.agreed = 0
        self.regret_s = 0.0  # full-rollout cost of the truncated choice above the best
        self.gain_s = 0.0  # full-rollout cost of the proposal above the best
        self.audit_s = 0.0  # time spent in audit rollouts, left out of the decision times
        self._seen = 0

    def decide(self, snapshot: Any) -> list[Action]:
        """The lookahead's decision, timed."""
        t0, audit0 = time.perf_counter(), self.audit_s
        out = super().decide(snapshot)
        self.times_s.append(time.perf_counter() - t0 - (self.audit_s - audit0))
        return out

    def _costs(
        self,
        work: Simulator,
        base: Policy,
        candidates: Sequence[Action | None],
        present: Sequence[int],
    ) -> list[float]:
        costs = super()._costs(work, base, candidates, present)
        self._seen += 1
        if self.audit_every and self._seen % self.audit_every == 0:
            t0, counted = time.perf_counter(), self.stats.rollouts
            full = [self._rollout(work, base, c, present, full=True).cost for c in candidates]
            self.stats.rollouts = counted  # audit rollouts are not the scheduler's
            self.audited += 1
            pick, best = int(np.argmin(costs)), int(np.argmin(full))
            self.agreed += int(pick == best)
            if math.isfinite(full[pick]) and math.isfinite(full[0]):
                self.regret_s += full[pick] - full[best]
                self.gain_s += full[0] - full[best]
            self.audit_s += time.perf_counter() - t0
        return costs


def _traces(scenario: Any, which: str, max_traces: int | None, max_jobs: int | None) -> list[Any]:
    traces = []
    if which == "val":  # the validation split: for choosing options without the test traces
        traces += list(scenario.held_out_traces("val"))[: max_traces or None]
    if which in ("test", "all"):
        traces += list(scenario.held_out_traces("test"))[: max_traces or None]
    if which in ("own", "all"):
        try:
            traces.append(scenario.own_trace())
        except Exception as exc:  # no own trace, or the public data is absent
            print(f"{scenario.name}: no own trace ({exc})", file=sys.stderr)
    if max_jobs:
        traces = [t.window(0, max_jobs) if len(t.jobs) > max_jobs else t for t in traces]
    return traces


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--scenario",
        nargs="+",
        default=["hetero-64"],
        metavar="NAME",
        help="scenarios (default: hetero-64)",
    )
    p.add_argument(
        "--traces",
        nargs="+",
        choices=["test", "own", "all", "val"],
        default=["test"],
        help="per scenario (one value for all, or one per --scenario): the synthetic test "
        "split, the scenario's own (Arena) trace, both (all), or the validation split (val: "
        "for choosing options; default: test)",
    )
    p.add_argument(
        "--max-traces",
        type=COUNT,
        default=None,
        metavar="N",
        help="at most N test (or validation) traces per scenario",
    )
    p.add_argument(
        "--max-jobs",
        type=COUNT,
        default=None,
        metavar="N",
        help="only the first N jobs of each trace",
    )
    p.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="lookahead options for every scenario (LookaheadOptions fields)",
    )
    p.add_argument(
        "--scenario-set",
        nargs="*",
        default=[],
        metavar="SCENARIO:KEY=VALUE",
        help="lookahead options for one scenario (over --set)",
    )
    p.add_argument(
        "--audit-scenarios",
        nargs="*",
        default=None,
        metavar="NAME",
        help="audit only these scenarios (default: every scenario, when --audit is given)",
    )
    p.add_argument(
        "--audit",
        type=NONNEG_INT,
        default=0,
        metavar="K",
        help="audit every K-th choice with full rollouts (0: no audit)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/tmp/lookahead-<time>/)",
    )
    p.add_argument(
        "--base-policy",
        default=None,
        metavar="PATH",
        help="a saved agent (policy folder or .zip) as the rollout policy instead of the "
        "options' base: the network proposes and finishes every rollout (bare, no margin)",
    )
    p.add_argument("--force", action="store_true", help="replace existing outputs")
    args = p.parse_args(argv)
    prov = Provenance.capture()
    out = args.out or Path("results/tmp") / f"lookahead-{time.strftime('%Y%m%d-%H%M%S')}"
    report, table = out / "lookahead.md", out / "lookahead.csv"
    if not args.force and (report.exists() or table.exists()):
        p.error(f"{report} exists (use --force to replace it)")
    common = key_values(args.set, "--set")
    per: dict[str, dict[str, Any]] = {}
    for item in args.scenario_set:
        name, _, kv = item.partition(":")
        per.setdefault(name, {}).update(key_values([kv], "--set"))
    if len(args.traces) not in (1, len(args.scenario)):
        p.error("--traces takes one value, or one per --scenario")
    which = dict(zip(args.scenario, args.traces * len(args.scenario), strict=False))
    rows = []
    for name in args.scenario:
        scenario = load_scenario(name)
        options = LookaheadOptions(**{**common, **per.get(name, {})})
        for trace in _traces(scenario, which[name], args.max_traces, args.max_jobs):
            t0 = time.perf_counter()
            crius = scenario.make_simulator().run(trace, make_policy("crius"))
            crius_s = time.perf_counter() - t0
            audit = (
                args.audit if args.audit_scenarios is None or name in args.audit_scenarios else 0
            )
            base = None
            if args.base_policy:
                from crius_gym.rl.agent_policy import AgentPolicy

                base = AgentPolicy(args.base_policy, scenario)
            policy = TimedLookahead(options, audit, base)
            t0 = time.perf_counter()
            look = scenario.make_simulator().run(trace, policy)
            look_s = time.perf_counter() - t0
            ms = 1000 * np.array(policy.times_s)
            st = policy.stats
            row = {
                "scenario": name,
                "trace": trace.name,
                "jobs": len(trace.jobs),
                "gpus": scenario.make_simulator().cluster.num_gpus,
                "crius_avg_jct_s": crius.summary.avg_jct_s,
                "lookahead_avg_jct_s": look.summary.avg_jct_s,
                "jct_ratio": look.summary.avg_jct_s / crius.summary.avg_jct_s,
                "throughput_ratio": look.summary.avg_throughput / crius.summary.avg_throughput,
                "queueing_crius_s": crius.summary.avg_queueing_s,
                "queueing_lookahead_s": look.summary.avg_queueing_s,
                "finished": look.summary.finished,
                "finished_crius": crius.summary.finished,
                "rejected": look.summary.rejected,
                "decisions": st.instants,
                "ms_per_decision": float(ms.mean()),
                "ms_p99": float(np.percentile(ms, 99)),
                "crius_ms_per_decision": 1000 * crius_s / max(1, crius.summary.decisions),
                "changed_pct": 100 * st.changed / max(1, st.choices),
                "rollouts_per_decision": st.rollouts / max(1, st.instants),
                "truncated_pct": 100 * st.truncated / max(1, st.rollouts),
                "audited": policy.audited,
                "audit_agree_pct": 100 * policy.agreed / policy.audited
                if policy.audited
                else math.nan,
                "audit_regret_s": policy.regret_s,
                "audit_gain_s": policy.gain_s,
                "wall_s": look_s,
                "options": ", ".join(
                    f"{k}={args.base_policy if k == 'base' and args.base_policy else v}"
                    for k, v in vars(options).items()
                ),
            }
            rows.append(row)
            print(
                f"{name} {trace.name}: JCT {row['jct_ratio']:.3f}x Crius, throughput "
                f"{row['throughput_ratio']:.3f}x, {row['ms_per_decision']:.1f} ms/decision "
                f"({look_s:.0f} s)",
                flush=True,
            )
    df = pd.DataFrame(rows)
    lines = [
        "# Crius with online lookahead (crius-lookahead) against Crius",
        "",
        prov.markdown(),
        "",
        "Each trace is run by Crius and by crius-lookahead (`crius_gym/policies/lookahead.py`): at "
        "each decision it judges Crius's next action against waiting, the job's other top Cells, "
        "the next waiting jobs on their best Cells and moves of the oldest running jobs, by "
        "rolling each out on a fork of the simulator that holds only the jobs already arrived "
        "and prices them by the estimator (the trace's future is never read). Ratios are "
        "lookahead / Crius on the same trace; ± is the 95% confidence interval of the mean over "
        "the traces (Student t). Milliseconds are wall time per simulator decision on this "
        "machine (2 cores; one process).",
        ""
        if not args.base_policy
        else f"\nRollout policy: the saved agent `{args.base_policy}` (bare network, through "
        "`crius_gym.rl.agent_policy.AgentPolicy`) instead of Crius: it proposes, and decides "
        "everything after a candidate in each rollout.\n",
        "| scenario | traces | jobs | GPUs | avg JCT vs Crius | throughput vs Crius "
        "| worst trace | ms / decision (p99) | Crius ms / decision | changed "
        "| rollouts / decision | truncated | audit: same best | audit: gain lost |",
        "| --- " * 14 + "|",
    ]
    for name, g in df.groupby("scenario", sort=False):
        jm, jci = mean_ci(g["jct_ratio"].to_numpy())
        tm, tci = mean_ci(g["throughput_ratio"].to_numpy())
        audit = g["audited"].sum()
        agree = (g["audit_agree_pct"] * g["audited"]).sum() / audit if audit else math.nan
        lines.append(
            f"| {name} | {len(g)} | {int(g['jobs'].sum())} | {int(g['gpus'].iloc[0])} | "
            f"{jm:.3f} ± {jci:.3f} | {tm:.3f} ± {tci:.3f} | {g['jct_ratio'].max():.3f} | "
            f"{g['ms_per_decision'].mean():.1f} ({g['ms_p99'].max():.0f}) | "
            f"{g['crius_ms_per_decision'].mean():.2f} | {g['changed_pct'].mean():.0f}% | "
            f"{g['rollouts_per_decision'].mean():.1f} | {g['truncated_pct'].mean():.0f}% | "
            + (f"{agree:.1f}% of {int(audit)}" if audit else "—")
            + " | "
            + (
                f"{100 * g['audit_regret_s'].sum() / g['audit_gain_s'].sum():.1f}%"
                if audit and g["audit_gain_s"].sum() > 0
                else "—"
            )
            + " |"
        )
    lines += [
        "",
        "Per trace:",
        "",
        "| scenario | trace | jobs | JCT ratio | throughput ratio | finished (Crius) "
        "| ms / decision | options |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['trace']} | {r['jobs']} | {r['jct_ratio']:.3f} | "
            f"{r['throughput_ratio']:.3f} | {r['finished']} ({r['finished_crius']}) | "
            f"{r['ms_per_decision']:.1f} | {r['options']} |"
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
