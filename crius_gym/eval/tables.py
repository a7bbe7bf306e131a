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
    "avg_jct_censored_s": "avg JCT, dropped jobs censored (s)",
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


#: Metrics compared with the reference, and how: ``pct`` = paired relative change (%), which
#: falls back to ``diff`` (paired difference in the metric's unit) for a table where the
#: reference's value is 0 on some trace; queueing is a difference always (its base is 0 on
#: uncrowded traces, where a percentage would drop the trace or explode).
COMPARED: dict[str, str] = {
    "avg_jct_s": "pct",
    "avg_jct_censored_s": "pct",
    "avg_queueing_s": "diff",
    "avg_throughput": "pct",
}


def aggregate(
    summary: pd.DataFrame,
    columns: Sequence[str] = tuple(REPORT_COLUMNS),
    reference: str | None = "crius",
) -> pd.DataFrame:
    """Per policy: mean and 95% CI of each column across traces, and the change vs a reference.

    The change is computed per trace against the reference policy on the same trace (paired),
    then averaged, with the 95% CI of the change itself across traces. It is a relative change
    in percent (``<metric>_vs_<ref>_pct``) where the reference's value is positive on every
    trace of the table, else the difference in the metric's unit (``…_diff``; see
    :data:`COMPARED`), so no trace is ever left out for its base. ``…_n`` counts the traces
    of each change (fewer than ``traces`` only where the policy itself has no value, e.g. no
    finished job). Negative = lower than the reference.
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
            for c, how in COMPARED.items():
                if c not in summary:
                    continue
                kind = _change_kind(summary, reference, c, how)
                base, own = ref.loc[common, c], mine.loc[common, c]
                change = 100 * (own / base - 1) if kind == "pct" else own - base
                valid = change.dropna()
                m, h = mean_ci(valid.tolist())
                row[f"{c}_vs_{reference}_{kind}"] = m
                row[f"{c}_vs_{reference}_{kind}_ci95"] = h
                row[f"{c}_vs_{reference}_{kind}_n"] = len(valid)
        out.append(row)
    return pd.DataFrame(out)


_UNITS = {"avg_throughput": "samples/s"}


def _change_header(column: str) -> str:
    """``avg JCT vs crius (%)`` / ``avg queueing vs crius (Δ s)`` for a change column."""
    metric, _, rest = column.partition("_vs_")
    reference, _, kind = rest.rpartition("_")
    name = REPORT_COLUMNS.get(metric, metric).split(" (")[0]
    unit = _UNITS.get(metric, "s")
    return f"{name} vs {reference} ({'%' if kind == 'pct' else f'Δ {unit}'})"


def _change_kind(summary: pd.DataFrame, reference: str, column: str, how: str) -> str:
    """``pct`` if asked and the reference's value is positive on every trace, else ``diff``."""
    if how != "pct":
        return "diff"
    base = summary.loc[summary["policy"] == reference, column]
    return "pct" if bool((base > 0).all()) else "diff"


def markdown_table(
    agg: pd.DataFrame,
    columns: Sequence[str] = tuple(REPORT_COLUMNS),
    reference: str | None = "crius",
) -> str:
    """A Markdown table of an :func:`aggregate` frame: ``mean ± ci`` per cell, then a legend.

    The legend states n (the ``traces`` column), the CI, and how each change against the
    reference is taken (% or a difference in the metric's unit, paired per trace); a change
    over fewer traces than its row's says ``n=k/N`` in its cell.
    """

    def cell(m: object, h: object, digits: int) -> str:
        if not isinstance(m, float | int) or math.isnan(float(m)):
            return "–"
        s = f"{float(m):,.{digits}f}"
        if isinstance(h, float) and not math.isnan(h):
            s += f" ± {h:,.{digits}f}"
        return s

    headers = ["policy"] + [REPORT_COLUMNS.get(c, c) for c in columns]
    rel_cols = [c for c in agg.columns if c.endswith(("_pct", "_diff"))]
    headers += [_change_header(c) for c in rel_cols]
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
            ci = f" ± {h:,.1f}" if isinstance(h, float) and not math.isnan(h) else ""
            n, total = r.get(f"{c}_n"), r.get("traces")
            short = f" (n={int(n)}/{int(total)})" if n is not None and n < total else ""
            vals.append(f"{v:+,.1f}{ci}{short}{flag}")
        lines.append("| " + " | ".join(vals) + " |")
    lines += [
        "",
        "Each cell: mean ± 95% CI (Student t) over the row's `traces` runs, one per trace"
        + (
            f"; changes against {reference} are paired per trace: (%) the relative change, "
            "(Δ unit) the difference, taken where the base can be 0 (queueing always), so no "
            "trace is dropped; fewer traces are marked n=k/N. `avg JCT, dropped jobs "
            "censored` counts jobs a policy left unfinished or gave up at the time from their "
            "arrival to the end of the run (a lower bound of their JCT); jobs no Cell can "
            "hold are rejected on arrival under every policy and counted in `rejected` only."
            if rel_cols
            else "."
        ),
    ]
    if any(float(u or 0) > 0 for u in agg.get("unfinished", [])):
        lines += [
            "",
            "† some runs of this policy left jobs unfinished (truncated or stopped at a "
            "horizon): its averages cover only the jobs it finished and its changes "
            "against the reference compare different sets of jobs.",
        ]
    return "\n".join(lines)
