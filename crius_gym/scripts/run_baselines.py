"""Run rule-based schedulers on a scenario's cluster and workload; write tables and figures.

For each scenario: runs every chosen policy on the traces (default: the scenario's own workload —
its Arena trace, or its first synthetic test trace; --traces test|val|own|all picks a set, as in
evaluate.py) with the same seed, and writes to ``--out/<scenario>/``: ``jobs_<policy>.csv`` (per
job, every trace), ``summary.csv`` (a row per policy and trace), ``jct_cdf.png``,
``queueing_cdf.png``, ``throughput.png`` (first trace) and Gantt charts of the first trace; and
``--out/baselines.md`` with a section per scenario: mean ± 95% CI over traces. Averages are over
finished jobs and never padded (unfinished and rejected jobs are counted beside them), except
one JCT average that counts dropped jobs censored at the end of the run.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from crius_gym.atomic import atomic_path, atomic_write_text, refuse_overwrite
from crius_gym.bundled import list_scenarios
from crius_gym.cli import (
    COUNT,
    POSITIVE,
    SEED,
    add_data_dir_option,
    add_output_options,
    add_trace_options,
    add_trace_set_options,
    policy_names_help,
    run_main,
)
from crius_gym.errors import ConfigError
from crius_gym.eval.resume import RunStore
from crius_gym.policies.registry import describe
from crius_gym.provenance import Provenance

# The simulator, plots and tables are imported in main(): --help answers at once.


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--scenario",
        nargs="+",
        default=["hetero-64"],
        metavar="NAME",
        help=f"scenario name(s) or YAML path(s); known: {', '.join(list_scenarios())}"
        " (default: hetero-64)",
    )
    add_trace_options(
        p, "a trace file to run instead of the scenario's own workload", repeatable=True
    )
    add_trace_set_options(
        p, None, "the scenario's own workload: its Arena trace, else synthetic test trace 0"
    )
    p.add_argument(
        "--policies",
        nargs="+",
        default=["crius", "fcfs", "random"],
        metavar="NAME",
        help=policy_names_help("policies to run", "crius fcfs random"),
    )
    p.add_argument("--seed", type=SEED, default=0, help="seed of the policies' random generators")
    p.add_argument(
        "--horizon",
        type=POSITIVE,
        metavar="SECONDS",
        help="stop at this simulated time and report unfinished jobs as such "
        "(default: run to completion)",
    )
    p.add_argument(
        "--iteration-divisor",
        type=COUNT,
        metavar="N",
        help="floor-divide the trace's num_iteration by N (default: the scenario's setting, else "
        "the artifact's convention: 5 for its simulate_trace_* files, 1 otherwise)",
    )
    p.add_argument(
        "--ground-truth",
        metavar="NAME",
        help="real iteration times: 'estimator', 'measured' (the Arena measurements where "
        "available) or 'artifact-table' (the artifact's oracle table, then also the "
        "schedulers' view) (default: the scenario's)",
    )
    add_data_dir_option(p)
    add_output_options(p, "baselines")
    p.add_argument(
        "--report-name",
        default="baselines.md",
        metavar="FILE",
        help="name of the Markdown report written in --out (default: baselines.md)",
    )
    p.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    from crius_gym import scenarios
    from crius_gym.eval.gantt import file_safe, gantt_file_name, plot_gantt
    from crius_gym.eval.plots import plot_cdf, plot_throughput
    from crius_gym.eval.runs import run_policies
    from crius_gym.eval.tables import aggregate, jobs_frame, markdown_table, summary_frame
    from crius_gym.eval.trace_sets import check_requests, trace_files, trace_set
    from crius_gym.plugins import check_policies
    from crius_gym.scenarios import load_scenario

    if args.ground_truth is not None and args.ground_truth not in scenarios.GROUND_TRUTHS:
        raise ConfigError(
            f"--ground-truth {args.ground_truth!r} not in {list(scenarios.GROUND_TRUTHS)}"
        )
    prov = Provenance.capture()
    out = Path(args.out)
    names = [load_scenario(n).name for n in args.scenario]
    for n in args.scenario:  # every name resolves and builds before the first run
        check_policies(args.policies, load_scenario(n))
    # Runs of an interrupted call with this --out are reused (crius_gym/eval/resume.py); its
    # partial outputs are this command's own, so only a finished run's are protected.
    store = RunStore(out)
    if not store.folder.is_dir():
        refuse_overwrite([out / args.report_name, *(out / n for n in names)], args.force)
    sections = [
        "# Rule-based schedulers",
        "",
        prov.markdown(),
        "",
        "Averages are over finished jobs (never padded), except `avg JCT, dropped jobs "
        "censored`, which also counts jobs a policy left unfinished or gave up (at the time "
        "from arrival to the end of the run); `finished`, `rejected` (never runnable, or given "
        "up by the policy) and `unfinished` jobs are counted beside them. Throughput is the "
        "time average of Σ samples/s of iterating jobs over [0, makespan].",
        "",
    ]
    for name in args.scenario:
        scenario = load_scenario(name)
        if args.iteration_divisor is not None:
            scenario = dataclasses.replace(
                scenario,
                workload=dataclasses.replace(
                    scenario.workload, iteration_divisor=args.iteration_divisor
                ),
            )
        tuner = scenario.make_tuner(args.ground_truth, args.data_dir)
        if args.trace:
            traces = trace_files(
                args.trace,
                tuner,
                trace_format=args.trace_format,
                trace_seed=args.trace_seed,
                iteration_divisor=scenario.workload.iteration_divisor,
                max_traces=args.max_traces,
            )
        elif args.traces:
            traces = trace_set(
                scenario, args.traces, tuner, data_dir=args.data_dir, max_traces=args.max_traces
            )
        else:
            traces = [scenario.own_trace(args.data_dir, tuner)]
            for line in traces[0].skipped_report():
                print(f"warning: {traces[0].name}: skipped {line}", file=sys.stderr, flush=True)
        moved = check_requests(traces, scenario.cluster.gpu_types, strict=args.strict)
        trace = traces[0]  # the one whose schedules are drawn
        print(
            f"{scenario.name}: {len(traces)} trace(s), {sum(len(t.jobs) for t in traces)} jobs "
            f"({', '.join(t.name for t in traces)}) on {scenario.cluster.num_gpus} GPUs; "
            f"policies {', '.join(args.policies)}",
            flush=True,
        )
        t0 = time.perf_counter()
        results = run_policies(
            scenario,
            traces,
            args.policies,
            seed=args.seed,
            horizon_s=args.horizon,
            ground_truth=args.ground_truth,
            data_dir=args.data_dir,
            tuner=tuner,
            progress=not args.no_progress,
            store=store,
        )
        wall = time.perf_counter() - t0
        d = out / scenario.name
        d.mkdir(parents=True, exist_ok=True)
        summ = summary_frame(results)
        with atomic_path(d / "summary.csv") as tmp:
            summ.to_csv(tmp, index=False)
        jobs = jobs_frame(results)
        for policy in args.policies:
            with atomic_path(d / f"jobs_{file_safe(policy)}.csv") as tmp:
                jobs[jobs["policy"] == policy].to_csv(tmp, index=False)
        caption = prov.markdown().replace("`", "")
        title = f"{scenario.name}: " + (trace.name if len(traces) == 1 else f"{len(traces)} traces")
        plot_cdf(results, "jct_s", d / "jct_cdf.png", caption, f"JCT CDF — {title}")
        plot_cdf(
            results, "queueing_s", d / "queueing_cdf.png", caption, f"Queueing delay CDF — {title}"
        )
        plot_throughput(results, d / "throughput.png", caption, f"Throughput — {title}")
        drawn = [r for r in results if r.trace == trace.name]  # the first trace's schedules
        for r in drawn:
            plot_gantt(
                r,
                scenario.cluster,
                d / gantt_file_name(r.policy),
                caption,
                f"{r.policy} — {scenario.name}: {trace.name}",
            )
        ref = "crius" if "crius" in args.policies else None
        table = markdown_table(aggregate(summ, reference=ref), reference=ref)
        rej = {r.policy: r.rejections for r in results if r.rejections}
        sections += [
            f"## {scenario.name}",
            "",
            f"{scenario.description}",
            "",
            f"Cluster: {scenario.cluster.num_gpus} GPUs — "
            + ", ".join(
                f"{g.num_nodes}×{g.gpus_per_node} {g.gpu_type}" for g in scenario.cluster.groups
            )
            + ". Traces: "
            + ", ".join(
                f"`{t.name}` ({len(t.jobs)} jobs"
                + (
                    f", iterations = num_iteration // {t.iteration_divisor}"
                    if t.iteration_divisor > 1
                    else ""
                )
                + (
                    f"; {len(t.skipped)} unusable rows skipped: " + "; ".join(t.skipped_report(5))
                    if t.skipped
                    else ""
                )
                + ")"
                for t in traces
            )
            + (". Mean ± 95% CI over traces (Student t)" if len(traces) > 1 else "")
            + f". Ground truth: {args.ground_truth or scenario.ground_truth}. "
            + (
                "Artifact options: " + ", ".join(scenario.sim.artifact_compat.active) + ". "
                if scenario.sim.artifact_compat.active
                else ""
            )
            + f"Wall time for all policies: {wall:.1f} s.",
            "",
            *(
                [
                    "Policies as this scenario defines them: "
                    + "; ".join(
                        f"`{describe(p, scenario)}`"
                        for p in args.policies
                        if scenario.policy_spec(p) is not None
                    )
                    + ".",
                    "",
                ]
                if any(scenario.policy_spec(p) is not None for p in args.policies)
                else []
            ),
            *([f"- {m}.\n" for m in moved] if moved else []),
            table,
            "",
        ]
        if rej:
            sections += ["Rejections by reason:", ""]
            for policy, reasons in rej.items():
                for reason, count in sorted(reasons.items()):
                    sections.append(f"- {policy}: {count} × {reason}")
            sections.append("")
        sections += [
            f"![JCT CDF]({scenario.name}/jct_cdf.png) "
            f"![queueing CDF]({scenario.name}/queueing_cdf.png) "
            f"![throughput]({scenario.name}/throughput.png)",
            "",
            f"Schedules on `{trace.name}` (Gantt charts: jobs on each GPU type's GPUs over "
            "time; starts, "
            "reconfigurations and preemptions marked; written by the command above and not "
            "committed: bulky): "
            + ", ".join(f"[{r.policy}]({scenario.name}/{gantt_file_name(r.policy)})" for r in drawn)
            + ".",
            "",
        ]
        print(table, flush=True)
    atomic_write_text(out / args.report_name, "\n".join(sections))
    if store.reused:
        print(f"{store.reused} run(s) reused from {store.folder}")
    store.clear()
    print(f"wrote {out / args.report_name}")


def cli() -> None:
    """Console-script entry point (errors on bad input exit with status 2)."""
    run_main(main)


if __name__ == "__main__":
    cli()
