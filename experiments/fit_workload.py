"""Fit the synthetic workload's default distributions on an Arena trace and print them.

Reads an Arena trace (by default the Philly one, arena/traces/simulate_trace_philly.csv, from the
public data directory), fits crius_gym.workload.synthetic.SyntheticConfig to it with
fit_synthetic_config — model-mix, batch-per-family, GPU-count and GPU-type frequencies (the counts
are the weights), a maximum-likelihood log-normal of num_iteration clipped to the observed range,
and the mean inter-arrival gap — and prints the numbers, with their fractions, and whether they
match the packaged defaults. Nothing is written. The defaults in crius_gym/workload/synthetic.py
are this script's output on the Philly trace (see docs/workload.md). The Arena simulation traces
are read as the artifact's simulator reads them (num_iteration // 5).

With --check SCENARIO..., it instead prints each scenario's workload as the simulator sees it: per
trace (the scenario's own one and its synthetic test traces), the offered load over the trace's
span (GPU-seconds on the requested GPUs / (cluster GPUs x span)), the mean arrival gap, and the
distribution of job lengths (run time on the requested GPUs, and GPU-seconds).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import yaml

from crius_gym import datasets
from crius_gym.bundled import list_scenarios
from crius_gym.cli import COUNT, add_data_dir_option, run_main
from crius_gym.scenarios import load_scenario, requested_demand
from crius_gym.workload.arena_trace import load_arena_trace, read_arena_trace
from crius_gym.workload.job import Trace
from crius_gym.workload.synthetic import SyntheticConfig, fit_synthetic_config, interarrival_gaps


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    add_data_dir_option(
        p,
        "public data directory holding arena/traces/ (default: $CRIUS_GYM_DATA or "
        "../shared/data next to the repository)",
    )
    p.add_argument(
        "--trace",
        default="philly",
        choices=sorted(datasets.ARENA_TRACES),
        help="which public Arena trace to fit (default: philly, the source of the defaults)",
    )
    p.add_argument(
        "--csv",
        metavar="PATH",
        help="fit this Arena-format trace CSV instead of a public one (overrides --trace)",
    )
    p.add_argument(
        "--iteration-divisor",
        type=COUNT,
        metavar="N",
        help="floor-divide num_iteration by N when reading (default: the artifact's convention, "
        "5 for the simulate_trace_* files, 1 for the testbed trace and --csv files)",
    )
    p.add_argument(
        "--check",
        nargs="+",
        metavar="SCENARIO",
        help="instead of fitting, print the offered load and job-length distribution of these "
        f"scenarios' traces (known: {', '.join(list_scenarios())})",
    )
    p.add_argument(
        "--preset",
        action="store_true",
        help="also print the fit as a block of crius_gym/data/workload_presets.yaml "
        "(named after --trace)",
    )
    p.add_argument(
        "--python",
        action="store_true",
        help="also print the fitted values as the PHILLY_* constants of synthetic.py, ready to "
        "paste",
    )
    return p.parse_args(argv)


def _table(title: str, pairs: Sequence[tuple[Any, float]]) -> list[str]:
    total = sum(w for _, w in pairs)
    lines = [f"{title}:"]
    lines += [f"  {k!s:<18} {int(w):>6}  {w / total:7.2%}" for k, w in pairs]
    return lines


def _python_block(cfg: SyntheticConfig) -> list[str]:
    out = [
        f"PHILLY_NUM_JOBS = {cfg.num_jobs}",
        f"PHILLY_MEAN_INTERARRIVAL_S = {cfg.mean_interarrival_s!r}",
        "PHILLY_MODEL_MIX: WeightedStr = (",
        *[f"    ({m!r}, {w!r})," for m, w in cfg.model_mix],
        ")",
        "PHILLY_BATCH_CHOICES: tuple[tuple[str, WeightedInt], ...] = (",
        *[f"    ({fam!r}, {ch!r})," for fam, ch in cfg.batch_choices],
        ")",
        "PHILLY_GPU_REQUEST: WeightedInt = (",
        *[f"    ({g!r}, {w!r})," for g, w in cfg.gpu_request],
        ")",
        "PHILLY_GPU_TYPE_WEIGHTS: WeightedStr = (",
        *[f"    ({t!r}, {w!r})," for t, w in cfg.gpu_type_weights],
        ")",
        f"PHILLY_ITERATIONS_LOG_MU = {cfg.iterations_log_mu:.6f}",
        f"PHILLY_ITERATIONS_LOG_SIGMA = {cfg.iterations_log_sigma:.6f}",
        f"PHILLY_ITERATIONS_MIN = {cfg.iterations_min}",
        f"PHILLY_ITERATIONS_MAX = {cfg.iterations_max}",
    ]
    return out


def _preset_name(trace: str) -> str:
    return "helios" if trace == "venus" else trace


def _preset_values(cfg: SyntheticConfig) -> dict[str, Any]:
    """The fitted fields of a preset (rounded as stored; replay gaps are not part of it)."""
    d = cfg.to_dict()
    keep = (
        "num_jobs",
        "mean_interarrival_s",
        "model_mix",
        "batch_choices",
        "gpu_request",
        "gpu_type_weights",
        "iterations_log_mu",
        "iterations_log_sigma",
        "iterations_min",
        "iterations_max",
    )
    out = {k: d[k] for k in keep}
    out["mean_interarrival_s"] = round(float(out["mean_interarrival_s"]), 6)
    out["iterations_log_mu"] = round(float(out["iterations_log_mu"]), 6)
    out["iterations_log_sigma"] = round(float(out["iterations_log_sigma"]), 6)
    return out


def _matches_defaults(cfg: SyntheticConfig) -> bool:
    default = SyntheticConfig()
    # The log-normal parameters are stored with 6 decimals; everything else exactly.
    close = math.isclose(
        cfg.iterations_log_mu, default.iterations_log_mu, abs_tol=1e-6
    ) and math.isclose(cfg.iterations_log_sigma, default.iterations_log_sigma, abs_tol=1e-6)
    rest = SyntheticConfig(
        **{
            **cfg.to_dict(),
            "iterations_log_mu": default.iterations_log_mu,
            "iterations_log_sigma": default.iterations_log_sigma,
        }
    )
    return close and rest == default


def _check(names: Sequence[str], data_dir: str | None) -> None:
    """Print each scenario's offered load and job lengths, per trace."""
    pct = (10, 50, 90, 99)
    head = (
        f"{'trace':<22} {'jobs':>5} {'span_s':>11} {'gap_s':>9} {'load':>5} "
        + " ".join(f"{'run_p' + str(q):>10}" for q in pct)
        + f" {'gpu_s_mean':>11}"
    )
    for name in names:
        sc = load_scenario(name)
        tuner = sc.make_tuner(data_dir=data_dir)
        traces: list[Trace] = [sc.held_out_traces("test", tuner)[0]]
        if sc.workload.trace is not None:
            traces.insert(0, sc.own_trace(data_dir, tuner))
        print(
            f"{sc.name}: {sc.cluster.num_gpus} GPUs; workload.load = {sc.workload.load} "
            f"(synthetic mean gap {sc.synthetic_config(tuner).mean_interarrival_s:,.0f} s)"
        )
        print("  " + head)
        for tr in traces:
            demand = [d for d in (requested_demand(tuner, j) for j in tr.jobs) if d is not None]
            gpu_s = np.array([d[0] for d in demand])
            run_s = np.array([d[1] for d in demand])
            span = tr.jobs[-1].arrival_s - tr.jobs[0].arrival_s
            load = gpu_s.sum() / (sc.cluster.num_gpus * span) if span > 0 else math.inf
            runs = " ".join(f"{np.percentile(run_s, q):>10,.0f}" for q in pct)
            label = f"{tr.name} (/{tr.iteration_divisor})" if tr.iteration_divisor > 1 else tr.name
            print(
                f"  {label:<22} {len(tr):>5} {span:>11,.0f} {span / max(1, len(tr) - 1):>9,.0f} "
                f"{load:>5.2f} {runs} {gpu_s.mean():>11,.0f}"
            )


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.check:
        _check(args.check, args.data_dir)
        return
    if args.csv:
        trace = read_arena_trace(args.csv, iteration_divisor=args.iteration_divisor)
        source = args.csv
    else:
        trace = load_arena_trace(
            args.trace, args.data_dir, iteration_divisor=args.iteration_divisor
        )
        source = str(datasets.data_dir(args.data_dir) / datasets.ARENA_TRACES[args.trace])
    cfg = fit_synthetic_config(trace)
    gaps = np.asarray(interarrival_gaps(trace))
    iters = np.asarray([j.iterations for j in trace.jobs], dtype=np.float64)
    lines = [
        f"fitted on {source}: {len(trace)} jobs, {len(trace.skipped)} rows skipped, "
        f"num_iteration // {trace.iteration_divisor}",
        f"num_jobs: {cfg.num_jobs}",
        f"mean_interarrival_s: {cfg.mean_interarrival_s:.4f}  (gaps: median "
        f"{np.median(gaps):.1f} s, max {gaps.max():.0f} s, coefficient of variation "
        f"{gaps.std() / gaps.mean():.2f}; Poisson would give 1.00)",
        *_table("model_mix (model, count, fraction)", cfg.model_mix),
        "batch_choices (per family: batch, count, fraction):",
        *[
            "  " + line
            for fam, ch in cfg.batch_choices
            for line in _table(fam, [(b, w) for b, w in ch])
        ],
        *_table("gpu_request (GPUs, count, fraction)", cfg.gpu_request),
        *_table("gpu_type_weights (type, count, fraction)", cfg.gpu_type_weights),
        f"iterations: log-normal mu={cfg.iterations_log_mu:.6f} sigma="
        f"{cfg.iterations_log_sigma:.6f} (median exp(mu)={math.exp(cfg.iterations_log_mu):.0f}; "
        f"observed median {np.median(iters):.0f}, mean {iters.mean():.0f}), clipped to "
        f"[{cfg.iterations_min}, {cfg.iterations_max}]",
        "matches the packaged SyntheticConfig defaults: "
        + ("yes" if _matches_defaults(cfg) else "no"),
    ]
    if args.python:
        lines += ["", "# --- paste into crius_gym/workload/synthetic.py ---", *_python_block(cfg)]
    if args.preset:
        block = {_preset_name(args.trace): _preset_values(cfg)}
        lines += [
            "",
            "# --- paste into crius_gym/data/workload_presets.yaml ---",
            yaml.safe_dump(block, sort_keys=False, default_flow_style=None, width=100).rstrip(),
        ]
    print("\n".join(lines))


if __name__ == "__main__":
    run_main(main)
