"""Full tables: n stated, no trace dropped for a zero base, dropped jobs in one JCT average."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from crius_gym.eval.tables import aggregate, markdown_table


def _summary(queue_crius=(0.0, 10.0, 20.0)) -> pd.DataFrame:
    rows = []
    for i, q in enumerate(queue_crius):
        for policy, scale in (("crius", 1.0), ("x", 1.5)):
            rows.append(
                {
                    "policy": policy,
                    "trace": f"t{i}",
                    "avg_jct_s": 100.0 * (i + 1) * scale,
                    "avg_jct_censored_s": 100.0 * (i + 1) * scale,
                    "avg_queueing_s": q * scale + (5.0 if policy == "x" else 0.0),
                    "avg_throughput": 10.0 / scale,
                    "rejected": 0,
                    "unfinished": 0,
                }
            )
    return pd.DataFrame(rows)


COLS = ("avg_jct_s", "avg_queueing_s", "avg_throughput", "rejected", "unfinished")


def test_a_zero_base_keeps_every_trace_as_a_difference():
    agg = aggregate(_summary(), COLS).set_index("policy")
    # Queueing: Crius is 0 on t0 → the paired difference over all 3 traces, never a %.
    assert "avg_queueing_s_vs_crius_pct" not in agg
    assert agg.loc["x", "avg_queueing_s_vs_crius_diff_n"] == 3
    assert agg.loc["x", "avg_queueing_s_vs_crius_diff"] == pytest.approx((5 + 10 + 15) / 3)
    assert agg.loc["x", "avg_jct_s_vs_crius_pct"] == pytest.approx(50.0)
    assert agg.loc["x", "avg_jct_s_vs_crius_pct_n"] == 3
    table = markdown_table(agg.reset_index(), COLS)
    assert "avg queueing vs crius (Δ s)" in table and "avg JCT vs crius (%)" in table
    assert "over the row's `traces` runs" in table


def test_a_pct_column_falls_back_to_a_difference_where_the_base_is_zero():
    s = _summary()
    s.loc[(s["policy"] == "crius") & (s["trace"] == "t0"), "avg_throughput"] = 0.0
    agg = aggregate(s, COLS).set_index("policy")
    assert "avg_throughput_vs_crius_diff" in agg and "avg_throughput_vs_crius_pct" not in agg
    assert agg.loc["x", "avg_throughput_vs_crius_diff_n"] == 3


def test_fewer_traces_are_marked_in_the_cell():
    s = _summary()
    s.loc[(s["policy"] == "x") & (s["trace"] == "t2"), "avg_jct_s"] = math.nan  # none finished
    agg = aggregate(s, COLS)
    assert "(n=2/3)" in markdown_table(agg, COLS)
