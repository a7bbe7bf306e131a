r"""The network as its own rollout policy: one step of lookahead over a trained network.

Runs Crius, each --policy's bare network (masked argmax, no margin, no envelope) and the same
network with lookahead (`crius_gym/rl/network_lookahead.py`: at each env decision its --set
top_k most likely valid actions and waiting are rolled out in lockstep with the network deciding
the rest, over the jobs already arrived, truncated horizon_s after the decision and the rest
valued by the tail; the cheapest is taken) through the simulator on each scenario's test traces
and/or its own Arena trace. Reports per scenario the average-JCT and throughput ratios to Crius
(mean ± 95% CI over the traces, Student t), the milliseconds of wall time per simulator
decision, and how often the lookahead departed from the network. E.g.

    python experiments/network_lookahead.py --policy results/tmp/distill/dagger-up64c12ch2-s2 \
        --scenario hetero-64 crius-testbed --traces test own --set top_k=4 horizon_s=7200

Resumable: each finished (scenario, trace, policy) run is a row of --out/network_lookahead.csv,
written as it finishes; rerunning the same command skips the rows present (--force starts over).
Writes --out/network_lookahead.md with the command, date and git revision.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crius_gym.atomic import atomic_path, atomic_write_text
from crius_gym.cli import COUNT, key_values
from crius_gym.eval.trace_sets import trace_set
from crius_gym.policies.registry import make_policy
from crius_gym.provenance import Provenance
from crius_gym.rl.agent_policy import AgentPolicy
from crius_gym.rl.network_lookahead import NetworkLookaheadOptions, NetworkLookaheadPolicy
from crius_gym.scenarios import load_scenario
from crius_gym.sim.policy import Policy
from crius_gym.stats import mean_ci


class _Timed:
    """A policy whose decide calls are timed (wall seconds each)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.seconds: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.policy, name)

    def decide(self, snapshot: Any) -> Any:
        t0 = time.perf_counter()
        out = self.policy.decide(snapshot)
        self.seconds.append(time.perf_counter() - t0)
        return out


def _row(name: str, trace: Any, label: str, result: Any, seconds: list[float]) -> dict[str, Any]:
    s = result.summary
    return {
        "scenario": name,
        "trace": trace.name,
        "policy": label,
        "jobs": len(trace.jobs),
        "avg_jct_s": s.avg_jct_s,
        "avg_throughput": s.avg_throughput,
        "avg_queueing_s": s.avg_queueing_s,
        "makespan_s": s.makespan_s,
        "finished": s.finished,
        "rejected": s.rejected,
        "decisions": len(seconds),
        "ms_per_decision": 1000 * float(np.mean(seconds)) if seconds else 0.0,
        "ms_p99": 1000 * float(np.percentile(seconds, 99)) if seconds else 0.0,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--policy", nargs="+", required=True, help="saved policies (folders or .zip files)"
    )
    p.add_argument(
        "--scenario", nargs="+", default=["hetero-64"], help="scenarios (default: hetero-64)"
    )
    p.add_argument(
        "--traces",
        nargs="+",
        choices=["test", "own", "all", "val"],
        default=["test"],
        help="per scenario (one value for all, or one per --scenario): the synthetic test "
        "split, the scenario's own (Arena) trace, both (all), or the validation split "
        "(default: test)",
    )
    p.add_argument(
        "--max-traces", type=COUNT, default=None, help="at most the first N traces of each set"
    )
    p.add_argument(
        "--set",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="lookahead options for every scenario (NetworkLookaheadOptions fields: top_k, "
        "wait, horizon_s, tail, margin)",
    )
    p.add_argument(
        "--scenario-set",
        nargs="*",
        default=[],
        metavar="SCENARIO:KEY=VALUE",
        help="lookahead options for one scenario (over --set)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default: results/tmp/network-lookahead-<time>/)",
    )
    p.add_argument(
        "--force", action="store_true", help="start over instead of resuming the rows present"
    )
    args = p.parse_args(argv)
    prov = Provenance.capture()
    out = args.out or Path("results/tmp") / f"network-lookahead-{time.strftime('%Y%m%d-%H%M%S')}"
    report, table = out / "network_lookahead.md", out / "network_lookahead.csv"
    common = key_values(args.set, "--set")
    per: dict[str, dict[str, Any]] = {}
    for item in args.scenario_set:
        name, _, kv = item.partition(":")
        per.setdefault(name, {}).update(key_values([kv], "--scenario-set"))
    if len(args.traces) not in (1, len(args.scenario)):
        p.error("--traces takes one value, or one per --scenario")
    which = dict(zip(args.scenario, args.traces * len(args.scenario), strict=False))
    rows: list[dict[str, Any]] = []
    if table.exists() and not args.force:
        rows = pd.read_csv(table).to_dict("records")
        print(f"resuming: {len(rows)} runs in {table}")
    done = {(r["scenario"], r["trace"], r["policy"]) for r in rows}
    options_of: dict[str, NetworkLookaheadOptions] = {}

    def save() -> None:
        out.mkdir(parents=True, exist_ok=True)
        with atomic_path(table) as tmp:
            pd.DataFrame(rows).to_csv(tmp, index=False)

    for name in args.scenario:
        scenario = load_scenario(name)
        options = NetworkLookaheadOptions(**{**common, **per.get(name, {})})
        options_of[name] = options
        traces = trace_set(scenario, which[name], scenario.make_tuner(), max_traces=args.max_traces)
        for trace in traces:
            runs: list[tuple[str, Any]] = [("crius", lambda: make_policy("crius"))]
            for path in args.policy:
                label = Path(path).name if Path(path).is_dir() else Path(path).stem
                runs.append((label, lambda p=path, s=scenario: AgentPolicy(p, s)))
                runs.append(
                    (
                        f"{label}+look",
                        lambda p=path, s=scenario, o=options: NetworkLookaheadPolicy(p, s, o),
                    )
                )
            for label, factory in runs:
                if (name, trace.name, label) in done:
                    continue
                policy = _Timed(factory())
                t0 = time.perf_counter()
                simulated: Policy = policy  # type: ignore[assignment]
                result = scenario.make_simulator().run(trace, simulated)
                row = _row(name, trace, label, result, policy.seconds)
                stats = getattr(policy.policy, "stats", None)
                row["changed_pct"] = (
                    100 * stats.changed / max(1, stats.choices) if stats is not None else 0.0
                )
                row["candidates_per_choice"] = (
                    stats.candidates / max(1, stats.choices) if stats is not None else 0.0
                )
                row["options"] = (
                    ", ".join(f"{k}={v}" for k, v in vars(options).items())
                    if label.endswith("+look")
                    else ""
                )
                rows.append(row)
                save()
                print(
                    f"{name} {trace.name} {label}: avg JCT {row['avg_jct_s']:.0f} s, "
                    f"{row['ms_per_decision']:.1f} ms/decision ({time.perf_counter() - t0:.0f} s)",
                    flush=True,
                )
    df = pd.DataFrame(rows)
    lines = [
        "# The network as its own rollout policy: lookahead over the bare network",
        "",
        prov.markdown(),
        "",
        "Each trace is run through the simulator by Crius, by each policy's bare network "
        "(masked argmax; no margin, no envelope) and by the same network with lookahead "
        "(`+look`, `crius_gym/rl/network_lookahead.py`): at each env decision its `top_k` most "
        "likely valid actions (and waiting) are rolled out in lockstep with the network "
        "deciding the rest, over the jobs already arrived (the trace's future is never read), "
        "truncated `horizon_s` simulated seconds after the decision and the rest valued by the "
        "tail; the cheapest is taken. Ratios are to Crius on the same trace, mean ± 95% CI over "
        "the traces (Student t); ms / decision is wall time per simulator decision point on "
        "this machine (2 cores, one process); *changed*: the share of the lookahead's choices "
        "that depart from the network's own action.",
        "",
        "| scenario | traces | policy | avg JCT / crius (×) | worst trace (×) "
        "| throughput / crius (×) | ms / decision (p99) | changed | candidates / choice "
        "| options |",
        "| --- " * 10 + "|",
    ]
    if not df.empty:
        for name, g in df.groupby("scenario", sort=False):
            base = g[g.policy == "crius"].set_index("trace")
            for label, h in g[g.policy != "crius"].groupby("policy", sort=False):
                h = h.set_index("trace")
                common_traces = [t for t in h.index if t in base.index]
                if not common_traces:
                    continue
                h = h.loc[common_traces]
                jct = (h.avg_jct_s / base.loc[common_traces].avg_jct_s).to_numpy()
                thr = (h.avg_throughput / base.loc[common_traces].avg_throughput).to_numpy()
                jm, jci = mean_ci(jct)
                tm, tci = mean_ci(thr)
                lines.append(
                    f"| {name} | {len(h)} | {label} | {jm:.3f} ± {jci:.3f} | {jct.max():.3f} | "
                    f"{tm:.3f} ± {tci:.3f} | {h.ms_per_decision.mean():.1f} "
                    f"({h.ms_p99.max():.0f}) | "
                    + (f"{h.changed_pct.mean():.0f}%" if label.endswith("+look") else "—")
                    + " | "
                    + (f"{h.candidates_per_choice.mean():.1f}" if label.endswith("+look") else "—")
                    + f" | {h.options.iloc[0] if label.endswith('+look') else ''} |"
                )
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(report, "\n".join(lines) + "\n")
    print(f"wrote {report} and {table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
