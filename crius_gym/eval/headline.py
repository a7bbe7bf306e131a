"""The headline table of an evaluation: every scheduler as a paired ratio to Crius.

The full tables (:mod:`crius_gym.eval.tables`) give every metric of every policy; the headline
answers the question a reader comes with: how each agent, as it is, compares with Crius and with
the strongest alternatives on the same traces. Per trace, a policy's average JCT and throughput
are divided by Crius's on that trace; the table gives the mean of those ratios with its 95% CI
over traces, the worst trace, the jobs a policy rejected or left unfinished (averages count
finished jobs only, so a policy that drops jobs would otherwise look better for it) and the wall
time per decision. The JCT compared is the average over every job a policy could have run, jobs
it left unfinished or gave up censored at the end of the run (``avg_jct_censored_s``; equal to
the plain average when every job finished), so dropping jobs never improves a ratio.

Agents evaluated under the same deployment (the same ``@margin`` suffix) are also pooled: the
mean over seeds and traces of their ratios, so "the mean of three seeds" is a table row, not
arithmetic done by hand. Its 95% interval comes from a two-way bootstrap that resamples seeds
and traces independently (the "pigeonhole" bootstrap for crossed designs, Owen 2007,
doi:10.1214/07-AOAS122): it widens with disagreement between seeds as well as between traces,
which a CI over traces of the seeds' mean would hide. The *best heuristic per trace* row takes,
on each trace, the lowest average JCT of any rule-based policy evaluated (an oracle's choice
among them).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from crius_gym.stats import mean_ci

#: Rule-based policies shown beside the agents when they were evaluated.
COMPARATORS: tuple[str, ...] = ("crius", "crius-artifact", "crius-lookahead", "sia")
#: Bootstrap resamples of a pooled row's interval (fixed seed: the same table every time).
BOOTSTRAP_REPS = 4000
BOOTSTRAP_SEED = 0


def pooled_interval(ratios: np.ndarray, reps: int = BOOTSTRAP_REPS) -> tuple[float, float]:
    """95% percentile interval of the mean of a traces × seeds matrix, both axes resampled.

    Args:
        ratios: one row per trace, one column per seed (NaN: no value, ignored).
        reps: bootstrap resamples.
    """
    t, s = ratios.shape
    if t * s < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    rows = rng.integers(0, t, size=(reps, t))
    cols = rng.integers(0, s, size=(reps, s))
    stats = np.array([np.nanmean(ratios[r][:, c]) for r, c in zip(rows, cols, strict=True)])
    lo, hi = np.nanpercentile(stats, [2.5, 97.5])
    return float(lo), float(hi)


def _ratios(summary: pd.DataFrame, policy: str, reference: str, column: str) -> pd.Series:
    """Per trace: ``policy``'s ``column`` over the reference's (NaN where the base is 0)."""
    ref = summary[summary["policy"] == reference].set_index("trace")[column]
    mine = summary[summary["policy"] == policy].set_index("trace")[column]
    common = mine.index.intersection(ref.index)
    return mine.loc[common] / ref.loc[common].where(ref.loc[common] > 0)


def _jct_column(summary: pd.DataFrame) -> str:
    """The censored average where the runs have it (older CSVs: the finished-job average)."""
    return "avg_jct_censored_s" if "avg_jct_censored_s" in summary else "avg_jct_s"


def _row(
    label: str,
    jct: pd.Series,
    thr: pd.Series,
    dropped: float,
    ms: float,
    note: str = "",
    interval: tuple[float, float] | None = None,
) -> dict[str, object]:
    valid = jct.dropna()
    m, h = mean_ci(valid.tolist()) if len(valid) else (math.nan, math.nan)
    t, th = mean_ci(thr.dropna().tolist()) if thr.notna().any() else (math.nan, math.nan)
    lo, hi = interval if interval is not None else (math.nan, math.nan)
    if interval is not None:
        h = math.nan  # the pooled row's interval is the bootstrap's, not a t-interval
    return {
        "policy": label,
        "traces": f"{len(valid)}/{len(jct)}",
        "jct_ratio": m,
        "jct_ratio_ci95": h,
        "jct_ratio_lo": lo,
        "jct_ratio_hi": hi,
        "worst_jct_ratio": float(valid.max()) if len(valid) else math.nan,
        "throughput_ratio": t,
        "throughput_ratio_ci95": th,
        "dropped_jobs": dropped,
        "ms_per_decision": ms,
        "note": note,
    }


def _group_key(label: str) -> str:
    """Agents pool by deployment: the text after '@' ('' for the recorded deployment)."""
    return label.split("@", 1)[1] if "@" in label else ""


def headline_frame(
    summary: pd.DataFrame,
    agents: Sequence[str],
    reference: str = "crius",
) -> pd.DataFrame:
    """The headline rows of one scenario's evaluation.

    Args:
        summary: one row per run (:func:`~crius_gym.eval.tables.summary_frame`), with a
            ``wall_s`` column (wall time of the run).
        agents: the agents' labels, in table order (``ppo:<run>`` and ``ppo:<run>@<margin>``).
        reference: the policy every ratio is taken against.

    Returns:
        One row per agent, per pooled group of agents, per comparator evaluated, and the best
        heuristic per trace: ``jct_ratio`` (mean per-trace ratio) ± ``jct_ratio_ci95``,
        ``worst_jct_ratio``, ``throughput_ratio`` ± CI, ``dropped_jobs`` (rejected + unfinished,
        mean per trace), ``ms_per_decision`` (total wall time / total decisions), ``note``;
        pooled rows give ``jct_ratio_lo`` / ``jct_ratio_hi`` (:func:`pooled_interval`) instead
        of ``jct_ratio_ci95``.
    """
    if reference not in set(summary["policy"]):
        raise ValueError(f"the headline needs the reference policy {reference!r} in the runs")
    jc = _jct_column(summary)

    def dropped(p: str) -> float:
        g = summary[summary["policy"] == p]
        return float((g["rejected"] + g["unfinished"]).mean())

    def ms(p: str) -> float:
        g = summary[summary["policy"] == p]
        decisions = float(g["decisions"].sum())
        return 1000 * float(g["wall_s"].sum()) / decisions if decisions else math.nan

    def single(p: str, note: str = "") -> dict[str, object]:
        jct = _ratios(summary, p, reference, jc)
        thr = _ratios(summary, p, reference, "avg_throughput")
        return _row(p, jct, thr, dropped(p), ms(p), note)

    rows = [single(a, "bare network" if a.endswith("@0") else "") for a in agents]
    groups: dict[str, list[str]] = {}
    for a in agents:
        groups.setdefault(_group_key(a), []).append(a)
    for key, members in groups.items():
        if len(members) < 2:
            continue
        jct = pd.concat([_ratios(summary, a, reference, jc) for a in members], axis=1)
        thr = pd.concat([_ratios(summary, a, reference, "avg_throughput") for a in members], axis=1)
        per_seed = [float(np.nanmean(jct[c])) for c in jct.columns]
        rows.append(
            _row(
                f"mean of {len(members)} agents" + (f" @{key}" if key else " (recorded)"),
                jct.mean(axis=1, skipna=False),
                thr.mean(axis=1, skipna=False),
                float(np.mean([dropped(a) for a in members])),
                float(np.nanmean([ms(a) for a in members])),
                f"{len(members)} seeds × traces, 95% bootstrap interval; worst agent "
                + f"{max(per_seed):.3f}×",
                pooled_interval(jct.to_numpy(dtype=float)),
            )
        )
    heuristics = [p for p in summary["policy"].unique() if p not in set(agents)]
    rows += [single(c) for c in COMPARATORS if c in heuristics]
    rules = summary[summary["policy"].isin(heuristics)]
    if len(heuristics) > 1:
        best = rules.loc[rules.groupby("trace")[jc].idxmin()].set_index("trace")
        ref = summary[summary["policy"] == reference].set_index("trace").loc[best.index]
        winners = best["policy"].value_counts()
        rows.append(
            _row(
                "best heuristic per trace",
                best[jc] / ref[jc].where(ref[jc] > 0),
                best["avg_throughput"] / ref["avg_throughput"].where(ref["avg_throughput"] > 0),
                float((best["rejected"] + best["unfinished"]).mean()),
                math.nan,
                ", ".join(f"{p} on {n}" for p, n in winners.items()),
            )
        )
    return pd.DataFrame(rows)


def headline_markdown(frame: pd.DataFrame, reference: str = "crius") -> str:
    """The headline frame as a Markdown table."""

    def num(v: object, h: object = None, digits: int = 3) -> str:
        if not isinstance(v, float | int) or math.isnan(float(v)):
            return "–"
        s = f"{float(v):.{digits}f}"
        if isinstance(h, float) and not math.isnan(h):
            s += f" ± {h:.{digits}f}"
        return s

    lines = [
        f"| policy | traces | avg JCT / {reference} (×) | worst trace (×) "
        f"| throughput / {reference} (×) | jobs rejected or unfinished | ms / decision | note |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def jct(r: pd.Series) -> str:
        lo, hi = r.get("jct_ratio_lo", math.nan), r.get("jct_ratio_hi", math.nan)
        if isinstance(lo, float) and not math.isnan(lo):
            return f"{num(r['jct_ratio'])} [{lo:.3f}, {hi:.3f}]"
        return num(r["jct_ratio"], r["jct_ratio_ci95"])

    for _, r in frame.iterrows():
        lines.append(
            f"| {r['policy']} | {r['traces']} | {jct(r)} | "
            f"{num(r['worst_jct_ratio'])} | "
            f"{num(r['throughput_ratio'], r['throughput_ratio_ci95'])} | "
            f"{num(r['dropped_jobs'], digits=1)} | {num(r['ms_per_decision'], digits=1)} | "
            f"{r['note']} |"
        )
    return "\n".join(lines)


__all__ = ["COMPARATORS", "headline_frame", "headline_markdown", "pooled_interval"]
