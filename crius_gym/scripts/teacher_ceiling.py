"""The DAgger teacher as a policy: the ceiling of distillation in the env's action space.

Runs each held-out trace three ways and writes a paired comparison against Crius:

* ``crius``: the env's guide driving the env (equal to Crius run by the simulator);
* ``teacher``: the labels of ``distill_lookahead.py`` as actions — the lookahead restricted to
  the actions the env can express now (``crius_gym/rl/dagger.py``), with the teacher options
  of --set over distill_lookahead's defaults. A network that imitated its labels perfectly
  would run this schedule;
* ``lookahead`` (with --free): the same lookahead options run through the simulator, free of
  the env's action space (``crius-lookahead``, as in ``results/lookahead``).

With --compare-free it also asks, at every state the teacher labels, what the unrestricted
lookahead would do first and counts the choices the env cannot express, by reason (a move of a
job changed earlier at the same instant, a Cell the env does not show, ...).

Writes --out/teacher.md and teacher.csv (one row per scenario and trace) with the command,
date and git revision.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from crius_gym.cli import COUNT
from crius_gym.provenance import Provenance
from crius_gym.scripts.distill_lookahead import TEACHER_DEFAULTS
from crius_gym.stats import mean_ci


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--scenario", nargs="+", default=["hetero-64"], help="scenarios (default: hetero-64)"
    )
    p.add_argument(
        "--traces",
        choices=["test", "val", "own"],
        default="test",
        help="held-out set: the synthetic test or validation split, or the scenario's own "
        "Arena trace (default: test)",
    )
    p.add_argument(
        "--max-traces", type=COUNT, default=None, help="at most this many traces per scenario"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="teacher option (LookaheadOptions field; repeatable; defaults: "
        + ", ".join(f"{k}={v}" for k, v in TEACHER_DEFAULTS.items())
        + ", as distill_lookahead.py)",
    )
    p.add_argument(
        "--env-from",
        default="results/reference_policy",
        help="saved policy whose env settings (action space) the teacher is restricted to "
        "(default: results/reference_policy)",
    )
    p.add_argument(
        "--env-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override an env setting of --env-from (EnvConfig field; repeatable), e.g. "
        "cells_per_job=12: what a larger action space would let the teacher express",
    )
    p.add_argument(
        "--free",
        action="store_true",
        help="also run the same lookahead through the simulator, free of the env",
    )
    p.add_argument(
        "--compare-free",
        action="store_true",
        help="count the states where the unrestricted lookahead's first action is no env "
        "action, by reason (one more lookahead call per state)",
    )
    p.add_argument("--out", default="results/teacher", help="output folder (default: %(default)s)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # The RL stack is imported here: --help answers at once.
    import numpy as np
    import pandas as pd

    from crius_gym.atomic import atomic_path, atomic_write_text
    from crius_gym.cli import key_values
    from crius_gym.env.cluster_env import CriusEnv
    from crius_gym.env.config import EnvConfig
    from crius_gym.eval.runs import run_policies
    from crius_gym.policies.lookahead import LookaheadOptions, LookaheadPolicy
    from crius_gym.rl.saved import policy_file, read_metadata
    from crius_gym.rl.teacher_run import REASONS, run_guide, run_teacher
    from crius_gym.scenarios import load_scenario

    prov = Provenance.capture()
    try:
        options = LookaheadOptions(**{**TEACHER_DEFAULTS, **key_values(args.set, "--set")})
    except TypeError as exc:
        raise SystemExit(f"--set: {exc}") from None
    meta = read_metadata(policy_file(args.env_from))
    try:
        cfg = EnvConfig(**{**dict(meta["env_config"]), **key_values(args.env_set, "--env-set")})
    except TypeError as exc:
        raise SystemExit(f"--env-set: {exc}") from None
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    for name in args.scenario:
        scenario = load_scenario(name)
        env = CriusEnv(scenario, cfg)
        traces = (
            [scenario.own_trace(None, env.tuner)]
            if args.traces == "own"
            else list(scenario.held_out_traces(args.traces, env.tuner))
        )
        traces = traces[: args.max_traces] if args.max_traces else traces
        free_jct: dict[str, float] = {}
        if args.free:
            results = run_policies(
                scenario,
                traces,
                ["crius-lookahead"],
                tuner=env.tuner,
                progress=False,
                policy_factory=lambda _name: LookaheadPolicy(options),
            )
            free_jct = {r.trace: r.summary.avg_jct_censored_s for r in results}
        for trace in traces:
            base = run_guide(env, trace)
            run = run_teacher(env, options, trace, compare_free=args.compare_free)
            row: dict[str, Any] = {
                "scenario": name,
                "trace": trace.name,
                "jobs": len(trace.jobs),
                "crius_avg_jct_s": base["avg_jct_censored_s"],
                "teacher_jct_ratio": run.metrics["avg_jct_censored_s"] / base["avg_jct_censored_s"],
                "teacher_throughput_ratio": run.metrics["avg_throughput"] / base["avg_throughput"],
                "lookahead_jct_ratio": free_jct.get(trace.name, float("nan"))
                / base["avg_jct_censored_s"],
                "labels": run.labels,
                "ms_per_label": 1000.0 * run.label_s / max(1, run.labels),
                "compared": run.compared,
                "inexpressible": run.inexpressible_share,
                **{f"why: {r}": run.inexpressible.get(r, 0) for r in REASONS},
            }
            rows.append(row)
            print(
                f"{name} {trace.name}: teacher {row['teacher_jct_ratio']:.3f}x Crius's JCT"
                + (f", lookahead {row['lookahead_jct_ratio']:.3f}x" if args.free else "")
                + (f", {row['inexpressible']:.1%} inexpressible" if args.compare_free else ""),
                flush=True,
            )
    df = pd.DataFrame(rows)
    with atomic_path(out / "teacher.csv") as tmp:
        df.to_csv(tmp, index=False)
    lines = [
        "# The DAgger teacher as a policy: the ceiling of distillation",
        "",
        prov.markdown(),
        "",
        f"Teacher options: `{options}`; env action space from `{args.env_from}` "
        f"(window_jobs={cfg.window_jobs}, cells_per_job={cfg.cells_per_job}, "
        f"running_jobs={cfg.running_jobs}, cell_selection={cfg.cell_selection}). "
        "*teacher*: the env driven by the DAgger labels (the lookahead restricted to the "
        "actions the env can express now); *lookahead*: the same options through the "
        "simulator, free of the env. Ratios to Crius on the same trace (average JCT, dropped "
        "jobs censored); ± is the 95% CI of the mean over traces (Student t). *Inexpressible*: "
        "share of labelled states where the unrestricted lookahead's first action is no env "
        "action.",
        "",
        "| scenario | traces | teacher JCT / Crius | teacher throughput / Crius | lookahead JCT / "
        "Crius | ms / label | inexpressible |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]

    def ci(x: np.ndarray) -> str:
        mean, half = mean_ci(x.tolist())
        if math.isnan(mean):
            return "—"
        return f"{mean:.3f}" if math.isnan(half) else f"{mean:.3f} ± {half:.3f}"

    for name, g in df.groupby("scenario", sort=False):
        lines.append(
            f"| {name} | {len(g)} | {ci(g['teacher_jct_ratio'].to_numpy())} | "
            f"{ci(g['teacher_throughput_ratio'].to_numpy())} | "
            f"{ci(g['lookahead_jct_ratio'].to_numpy())} | {g['ms_per_label'].mean():.1f} | "
            + (f"{g['inexpressible'].mean():.1%}" if args.compare_free else "—")
            + " |"
        )
    if args.compare_free:
        why = df[[c for c in df.columns if c.startswith("why: ")]].sum()
        total = why.sum()
        lines += [
            "",
            "Why the unrestricted choice was no env action (all traces):",
            "",
            "| reason | states | share |",
            "| --- | --- | --- |",
            *(f"| {k[5:]} | {int(v)} | {v / total:.1%} |" for k, v in why.items() if v and total),
        ]
    lines += ["", "Per trace: `teacher.csv`.", ""]
    atomic_write_text(out / "teacher.md", "\n".join(lines))
    print(f"wrote {out / 'teacher.md'}")


def cli() -> None:
    """Console entry point."""
    main()
