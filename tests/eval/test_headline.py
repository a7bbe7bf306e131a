"""The headline table: paired ratios to Crius, pooled agents, the best heuristic per trace."""

from __future__ import annotations

import pandas as pd
import pytest

from crius_gym.eval.headline import headline_frame, headline_markdown


def _summary() -> pd.DataFrame:
    rows = []
    # (policy, trace, avg JCT, throughput, rejected)
    data = [
        ("crius", "t0", 100.0, 10.0, 0),
        ("crius", "t1", 200.0, 20.0, 0),
        ("sia", "t0", 90.0, 10.0, 0),
        ("sia", "t1", 260.0, 18.0, 0),
        ("fcfs", "t0", 50.0, 5.0, 3),  # cheap only because it rejected three jobs
        ("fcfs", "t1", 400.0, 10.0, 3),
        ("ppo:a@0", "t0", 80.0, 11.0, 0),
        ("ppo:a@0", "t1", 220.0, 20.0, 0),
        ("ppo:b@0", "t0", 120.0, 10.0, 0),
        ("ppo:b@0", "t1", 180.0, 20.0, 0),
    ]
    for policy, trace, jct, thr, rej in data:
        rows.append(
            {
                "policy": policy,
                "trace": trace,
                "avg_jct_s": jct,
                "avg_throughput": thr,
                "rejected": rej,
                "unfinished": 0,
                "decisions": 10,
                "wall_s": 0.5,
            }
        )
    return pd.DataFrame(rows)


def test_ratios_are_paired_per_trace_and_agents_pool_by_deployment():
    f = headline_frame(_summary(), ["ppo:a@0", "ppo:b@0"]).set_index("policy")
    assert f.loc["ppo:a@0", "jct_ratio"] == pytest.approx((0.8 + 1.1) / 2)
    assert f.loc["ppo:a@0", "worst_jct_ratio"] == pytest.approx(1.1)
    assert f.loc["ppo:b@0", "jct_ratio"] == pytest.approx((1.2 + 0.9) / 2)
    pooled = f.loc["mean of 2 agents @0"]
    assert pooled["jct_ratio"] == pytest.approx(((0.8 + 1.2) / 2 + (1.1 + 0.9) / 2) / 2)
    assert pooled["traces"] == "2/2"
    assert f.loc["ppo:a@0", "ms_per_decision"] == pytest.approx(50.0)
    assert f.loc["crius", "jct_ratio"] == pytest.approx(1.0)


def test_the_best_heuristic_per_trace_and_dropped_jobs_are_shown():
    f = headline_frame(_summary(), ["ppo:a@0", "ppo:b@0"]).set_index("policy")
    best = f.loc["best heuristic per trace"]
    # fcfs on t0 (50), crius on t1 (200): the oracle's choice, with fcfs's rejections visible.
    assert best["jct_ratio"] == pytest.approx((0.5 + 1.0) / 2)
    assert best["dropped_jobs"] == pytest.approx(1.5)
    assert "fcfs on 1" in best["note"] and "crius on 1" in best["note"]
    assert "sia" in f.index and "fcfs" not in f.index  # comparators only
    md = headline_markdown(f.reset_index())
    assert "mean of 2 agents @0" in md and md.count("\n") == len(f) + 1


def test_a_missing_reference_is_an_error():
    s = _summary()
    with pytest.raises(ValueError, match="crius"):
        headline_frame(s[s["policy"] != "crius"], ["ppo:a@0"])


def test_policy_options_apply_per_scenario_and_later_ones_win():
    from crius_gym.scripts.evaluation import policy_options

    specs = [
        "crius-lookahead.running_jobs=4",
        "crius-sim-1280:crius-lookahead.horizon_s=3600",
        "crius-sim-1280:crius-lookahead.running_jobs=2",
    ]
    assert policy_options(specs, "crius-sim-1280", "crius-lookahead") == (
        ("horizon_s", 3600),
        ("running_jobs", 2),
    )
    assert policy_options(specs, "hetero-64", "crius-lookahead") == (("running_jobs", 4),)
    assert policy_options(specs, "hetero-64", "crius") == ()
    with pytest.raises(SystemExit, match="SCENARIO:"):
        policy_options(["crius-lookahead=3"], "hetero-64", "crius-lookahead")


def test_pooled_row_has_a_bootstrap_interval_over_seeds_and_traces():
    frame = headline_frame(_summary(), ["ppo:a@0", "ppo:b@0"])
    pooled = frame[frame["policy"] == "mean of 2 agents @0"].iloc[0]
    # Ratios: a = 0.8, 1.1; b = 1.2, 0.9 → mean 1.0, and the interval covers seed spread.
    assert pooled["jct_ratio"] == pytest.approx(1.0)
    assert pooled["jct_ratio_lo"] < 1.0 < pooled["jct_ratio_hi"]
    assert pooled["jct_ratio_lo"] >= 0.8 and pooled["jct_ratio_hi"] <= 1.2
    assert "[" in headline_markdown(frame)  # shown as an interval, not ± a t-interval
    again = headline_frame(_summary(), ["ppo:a@0", "ppo:b@0"])
    assert again.equals(frame)  # the bootstrap is seeded: same table every time


def test_the_censored_average_is_compared_where_present():
    s = _summary()
    s["avg_jct_censored_s"] = s["avg_jct_s"]
    s.loc[s["policy"] == "fcfs", "avg_jct_censored_s"] = 1000.0  # its dropped jobs count
    frame = headline_frame(s, ["ppo:a@0", "ppo:b@0"]).set_index("policy")
    # Without the censoring fcfs would win t0 (50 s, only because it rejected three jobs).
    assert frame.loc["best heuristic per trace", "note"] == "sia on 1, crius on 1"
