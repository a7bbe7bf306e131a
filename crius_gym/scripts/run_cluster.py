"""Run schedulers on a Ray cluster instead of the simulator, and compare with the simulator.

Starts a local multi-node Ray cluster for the scenario (``--ray-nodes`` Ray nodes, each hosting
a block of the scenario's nodes; needs only the ``ray`` extra) or joins one (``--address``), then
runs the scenario's own trace (its first ``--max-jobs`` jobs) under each policy through
:mod:`crius_gym.runtime`: node agents emulate every job's iterations at the speed of its plan,
``--time-scale`` scenario seconds per wall second, with checkpoints. Writes to
``--out/<scenario>/``: ``summary.csv`` and ``jobs_<policy>.csv`` (the columns of
``run_baselines.py``; summary rows gain the runtime's own: wall time, failures, redone work,
checkpoints, decision latency), and with ``--compare-sim`` also the simulator's run of the same
jobs (rows with ``backend=simulator``) and a Markdown report of the two side by side
(``--report``, by default ``--out/runtime.md``).
"""

from __future__ import annotations

import argparse
import dataclasses
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
    policy_names_help,
    run_main,
)
from crius_gym.provenance import Provenance


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--scenario",
        default="crius-testbed",
        metavar="NAME",
        help=f"scenario name or YAML path; known: {', '.join(list_scenarios())} "
        "(default: crius-testbed)",
    )
    p.add_argument(
        "--policies",
        nargs="+",
        default=["crius"],
        metavar="NAME",
        help=policy_names_help("policies to run", "crius"),
    )
    p.add_argument(
        "--policy",
        nargs="+",
        default=[],
        metavar="PATH",
        help="saved agents to run too (a policy folder or .zip, e.g. results/reference_policy), "
        "through crius_gym.rl.agent_policy.AgentPolicy",
    )
    p.add_argument(
        "--deployment",
        choices=["bare", "recorded"],
        default="bare",
        help="how saved agents act: the bare network (default) or with the guide margin and "
        "envelope recorded in their metadata",
    )
    p.add_argument(
        "--time-scale",
        type=POSITIVE,
        default=1000.0,
        metavar="X",
        help="scenario seconds per wall second (default: 1000)",
    )
    p.add_argument(
        "--max-jobs",
        type=COUNT,
        metavar="N",
        help="run only the trace's first N jobs (default: all)",
    )
    p.add_argument(
        "--checkpoint-every",
        type=POSITIVE,
        default=600.0,
        metavar="SECONDS",
        help="scenario seconds between a running job's checkpoints (default: 600)",
    )
    p.add_argument(
        "--ray-nodes",
        type=COUNT,
        default=2,
        metavar="N",
        help="Ray nodes of the local cluster (scenario nodes are split among them; default: 2)",
    )
    p.add_argument(
        "--address",
        metavar="HEAD:PORT",
        help="join this Ray cluster instead of starting a local one (one agent per alive node; "
        "checkpoints need a file system shared by its nodes)",
    )
    p.add_argument("--seed", type=SEED, default=0, help="seed of the policies' random generators")
    p.add_argument(
        "--compare-sim",
        action="store_true",
        help="also run the simulator on the same jobs and write the report side by side",
    )
    p.add_argument(
        "--report",
        metavar="PATH",
        help="where --compare-sim writes its Markdown report (default: <out>/runtime.md)",
    )
    add_data_dir_option(p)
    add_output_options(p, "run_cluster")
    p.add_argument("--no-progress", action="store_true", help="print no per-decision progress")
    return p.parse_args()


def main() -> None:
    args = parse_args()
    import pandas as pd

    from crius_gym.errors import ConfigError
    from crius_gym.eval.gantt import file_safe
    from crius_gym.eval.tables import jobs_frame, summary_frame
    from crius_gym.plugins import check_policies, make_policy
    from crius_gym.runtime.session import RuntimeSession
    from crius_gym.scenarios import load_scenario
    from crius_gym.sim.policy import Policy

    try:
        import ray  # noqa: F401
    except ImportError:
        raise ConfigError("run_cluster.py needs Ray: pip install -e '.[ray]'") from None
    prov = Provenance.capture()
    scenario = load_scenario(args.scenario)
    check_policies(args.policies, scenario)
    if args.policy:
        from crius_gym.rl.agent_policy import AgentPolicy

        agents = [AgentPolicy(p, scenario, deployment=args.deployment) for p in args.policy]
    else:
        agents = []
    names = [*args.policies, *(a.name for a in agents)]
    if len(set(names)) != len(names):
        raise SystemExit(f"--policies/--policy: two schedulers share a name in {names}")

    def make(name: str) -> Policy:
        for a in agents:
            if a.name == name:
                return a
        return make_policy(name, scenario=scenario)

    out = Path(args.out)
    d = out / scenario.name
    report = Path(args.report) if args.report else out / "runtime.md"
    refuse_overwrite([d / "summary.csv", report], args.force)
    tuner = scenario.make_tuner(None, args.data_dir)
    trace = scenario.own_trace(args.data_dir, tuner)
    if args.max_jobs is not None:
        trace = dataclasses.replace(trace, jobs=trace.jobs[: args.max_jobs])
    print(
        f"{scenario.name}: {len(trace.jobs)} jobs of {trace.name} on "
        f"{scenario.cluster.num_gpus} GPUs; time scale {args.time_scale:g}x",
        flush=True,
    )
    results, stats_rows = [], []
    with RuntimeSession(
        scenario,
        tuner,
        ray_nodes=args.ray_nodes,
        address=args.address,
        data_dir=args.data_dir,
        checkpoint_dir=d / "checkpoints",
    ) as session:
        print(f"Ray cluster ready in {session.startup_s:.1f} s ({session.describe()})", flush=True)
        for name in names:
            t0 = time.perf_counter()

            def progress(done: int, total: int, name: str = name, t0: float = t0) -> None:
                if not args.no_progress:
                    print(
                        f"\r{name}: {done}/{total} jobs done, {time.perf_counter() - t0:.0f} s",
                        end="",
                        flush=True,
                    )

            run = session.run(
                trace,
                make(name),
                seed=args.seed,
                time_scale=args.time_scale,
                checkpoint_every_s=args.checkpoint_every,
                on_progress=progress,
            )
            print(
                f"\r{name}: {run.result.summary.finished} finished in {run.stats.wall_s:.0f} s",
                flush=True,
            )
            results.append(run.result)
            stats_rows.append({"policy": name, "backend": "runtime", **run.stats.as_dict()})
        memory_mb = session.memory_mb()
    summ = summary_frame(results).merge(pd.DataFrame(stats_rows), on="policy")
    summ["time_scale"] = args.time_scale
    summ["cluster_memory_mb"] = memory_mb
    jobs = jobs_frame(results)
    if args.compare_sim:
        sim = scenario.make_simulator(tuner, None, args.data_dir)
        sims = [sim.run(trace, make(n), seed=args.seed) for n in names]
        ssum = summary_frame(sims)
        ssum["backend"] = "simulator"
        summ = pd.concat([summ, ssum], ignore_index=True)
        sjobs = jobs_frame(sims)
        sjobs["backend"] = "simulator"
        jobs["backend"] = "runtime"
        jobs = pd.concat([jobs, sjobs], ignore_index=True)
        from crius_gym.runtime.fidelity import fidelity_markdown

        atomic_write_text(
            report,
            fidelity_markdown(results, sims, stats_rows, prov, vars(args), memory_mb),
        )
    d.mkdir(parents=True, exist_ok=True)
    with atomic_path(d / "summary.csv") as tmp:
        summ.to_csv(tmp, index=False)
    for name in names:
        with atomic_path(d / f"jobs_{file_safe(name)}.csv") as tmp:
            jobs[jobs["policy"] == name].to_csv(tmp, index=False)
    print(f"wrote {d}/summary.csv, jobs_<policy>.csv" + (f", {report}" if args.compare_sim else ""))


def cli() -> None:
    """Console entry point."""
    run_main(main)


if __name__ == "__main__":
    cli()
