"""Result tables: per-run summaries, per-policy aggregates with 95% confidence intervals."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from crius_gym.sim.simulator import RunResult
from crius_gym.stats import mean_ci

#: Summary columns shown in reports, with their display names.
REPORT_COLUMNS = {
    "avg_jct_s": "avg JCT (s)",
    "p95_jct_s": "p95 JCT (s)",
    "p99_jct_s": "p99 JCT (s)",
    "avg_queueing_s": "avg queueing (s)",
    "avg_throughput": "avg throughput (samples/s)",
    "avg_gpu_utilization": "GPU util.",
    "makespan_s": "makespan (s)",
    "arrived": "arrived",
    "finished": "finished",
    "rejected": "rejected",
    "unfinished": "unfinished",
}


def summary_frame(results: Sequence[RunResult]) -> pd.DataFrame:
    """One row per run: policy, trace and every :class:`RunSummary` field."""
    rows = [{"policy": r.policy, "trace": r.trace, **r.summary.as_dict()} for r in results]
    return pd.DataFrame(rows)


def jobs_frame(results: Sequence[RunResult]) -> pd.DataFrame:
    """One row per job per run."""
    frames = []
    for r in results:
        df = pd.DataFrame([j.__dict__ for j in r.jobs])
        df.insert(0, "trace", r.trace)
        df.insert(0, "policy", r.policy)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def aggregate(
    summary: pd.DataFrame,
    columns: Sequence[str] = tuple(REPORT_COLUMNS),
    reference: str | None = "crius",
) -> pd.DataFrame:
    """Per policy: mean and 95% CI of each column across traces, and the change vs a reference.

    The relative change is computed per trace against the reference policy on the same trace
    (paired), then averaged, with the 95% CI of the change itself across traces
    (``…_pct_ci95``); it is in percent, negative = lower than the reference.
    """
    out = []
    for policy, g in summary.groupby("policy", sort=False):
        row: dict[str, object] = {"policy": policy, "traces": len(g)}
        for c in columns:
            m, h = mean_ci(g[c].tolist())
            row[c] = m
            row[f"{c}_ci95"] = h
        if reference is not None and reference in set(summary["policy"]):
            ref = summary[summary["policy"] == reference].set_index("trace")
            mine = g.set_index("trace")
            common = mine.index.intersection(ref.index)
            for c in ("avg_jct_s", "avg_queueing_s", "avg_throughput"):
                base = ref.loc[common, c]
                # A change relative to zero is undefined: those traces are left out.
                rel = 100 * (mine.loc[common, c] / base.where(base > 0) - 1)
                m, h = mean_ci(rel.dropna().tolist())
                row[f"{c}_vs_{reference}_pct"] = m
                row[f"{c}_vs_{reference}_pct_ci95"] = h
        out.append(row)
    return pd.DataFrame(out)


def markdown_table(
    agg: pd.DataFrame,
    columns: Sequence[str] = tuple(REPORT_COLUMNS),
    reference: str | None = "crius",
) -> str:
    """A Markdown table of an :func:`aggregate` frame: ``mean ± ci`` per cell."""

    def cell(m: object, h: object, digits: int) -> str:
        if not isinstance(m, float | int) or math.isnan(float(m)):
            return "–"
        s = f"{float(m):,.{digits}f}"
        if isinstance(h, float) and not math.isnan(h):
            s += f" ± {h:,.{digits}f}"
        return s

    headers = ["policy"] + [REPORT_COLUMNS.get(c, c) for c in columns]
    rel_cols = [c for c in agg.columns if c.endswith("_pct")]
    headers += [
        c.replace("_s_vs_", " vs ").replace("_vs_", " vs ").replace("_pct", " (%)")
        for c in rel_cols
    ]
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for _, r in agg.iterrows():
        digits = {"avg_gpu_utilization": 2, "avg_throughput": 1}
        vals = [str(r["policy"])]
        for c in columns:
            d = digits.get(c, 0)
            vals.append(cell(r[c], r.get(f"{c}_ci95"), d))
        # A change computed over runs that left jobs unfinished compares different job sets.
        flag = " †" if float(r.get("unfinished", 0) or 0) > 0 else ""
        for c in rel_cols:
            v, h = r[c], r.get(f"{c}_ci95")
            if not isinstance(v, float) or math.isnan(v):
                vals.append("–")
                continue
            ci = f" ± {h:.1f}" if isinstance(h, float) and not math.isnan(h) else ""
            vals.append(f"{v:+.1f}{ci}{flag}")
        lines.append("| " + " | ".join(vals) + " |")
    if any(float(u or 0) > 0 for u in agg.get("unfinished", [])):
        lines += [
            "",
            "† some runs of this policy left jobs unfinished (truncated or stopped at a "
            "horizon): its averages cover only the jobs it finished and its changes "
            "against the reference compare different sets of jobs.",
        ]
    return "\n".join(lines)
