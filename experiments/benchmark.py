"""Measure speed and memory: simulator replays, decision latency, env and PPO steps/s, tuner.

Every measurement runs in a fresh child process (start-up included, peak RSS its own) and is
repeated --repeats times; the report keeps the median. Results go to --out/benchmark.md and
--out/benchmark.csv with the command and date. Machines are noisy: compare ratios measured in
one run, not numbers across runs.

Sections (--sections, default all):
  sim    Arena Philly trace (1,938 jobs, to completion) on crius-sim-1280 with each --policies
         policy, and the same in the artifact setting (crius-sim-1280-artifact: its rounds,
         books, oracle table and policy variants)
  env    env steps/s with random masked actions on hetero-64, with the guide and without
  ppo    end-to-end training decisions/s on the default mixture: the default (vine) agent, and
         the per-sequence-baseline and GAE configurations; 16,384 decisions measured after a
         40,000-decision warm-up (the vine's replay then costs what it costs in a run), with
         the decisions labelled by rollouts per second beside them
  tuner  time to tune a new (model, batch) on the 4-type 1,280-GPU cluster, cache hit rate;
         the same in the Megatron-LM plan space, and one GPT-3 175B Cell of 1,024 A100 80 GB
  scale  a synthetic 20,000-job trace on a 6,400-GPU four-type cluster (fcfs, crius), and
         jobs/s at 1x, 4x and 16x cluster and trace size
  rollouts  the vine's rollouts on each backend: decisions of the default mixture's training
         episodes labelled per second with 0 (in the trainer), 1, 2 and 4 worker processes
         (process) or Ray actors (ray, a private local instance; its start-up beside)
  dagger the lookahead teacher of distill_lookahead.py: training states of the default
         mixture labelled per second and its rollouts per label (teacher-driven episodes of
         the reference policy's env settings), with its default options and with tail=list
  overload  a synthetic 50,000-job trace at Philly's arrival rate on crius-sim-1280 (no load
         scaling: FCFS's queue grows to thousands of jobs), fcfs and crius, with the mean cost
         of a decision per bin of waiting jobs (decide_ms_q<N>: N or more jobs waiting)
"""

from __future__ import annotations

import argparse
import dataclasses
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from crius_gym.atomic import atomic_path, atomic_write_text, refuse_overwrite
from crius_gym.cli import COUNT, add_data_dir_option, add_output_options, run_main
from crius_gym.eval.bench import TimedPolicy, isolated, median_of
from crius_gym.provenance import Provenance

SECTIONS = ("sim", "env", "ppo", "rollouts", "dagger", "tuner", "scale", "overload")
TARGETS = {  # (section, key) -> (comparison, value, source issue)
    ("sim", "crius", "wall_s"): ("<=", 30.0, "issue 5 (issue 3: 60 s)"),
    ("sim", "fcfs", "wall_s"): ("<=", 5.0, "issue 3"),
    ("sim", "crius (artifact setting)", "wall_s"): (
        "<=",
        30.0,
        "issue 10 (the artifact: ~52 min for 2,000 rounds here)",
    ),
    ("sim", "crius", "decide_mean_ms"): ("<=", 10.0, "issue 5 (issue 3: 20 ms)"),
    ("env", "random, no guide", "steps_per_s"): (">=", 5000.0, "issue 5 (issue 4: 3,000)"),
    ("ppo", "sequence baseline", "steps_per_s"): (">=", 1000.0, "issue 11"),
    ("ppo", "default (vine)", "steps_per_s"): (">=", 1000.0, "issue 11"),
    ("scale", "fcfs", "wall_s"): ("<=", 30.0, "issue 5"),
    ("scale", "crius", "wall_s"): ("<=", 300.0, "issue 5"),
    ("overload", "fcfs", "wall_s"): ("<=", 60.0, "issue 14"),
    ("overload", "crius", "wall_s"): ("<=", 120.0, "issue 14"),
}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--sections",
        nargs="+",
        choices=SECTIONS,
        default=list(SECTIONS),
        help="what to measure (default: all)",
    )
    p.add_argument(
        "--policies",
        nargs="+",
        default=["fcfs", "crius"],
        help="policies of the sim section (default: fcfs crius)",
    )
    p.add_argument("--repeats", type=COUNT, default=3, help="runs per measurement (median kept)")
    p.add_argument(
        "--quick",
        action="store_true",
        help="tiny sizes (a smoke test of the script, not a measurement)",
    )
    add_data_dir_option(p)
    add_output_options(p, "benchmark")
    return p.parse_args()


# ---------------------------------------------------------------------------- measurements
def replay(
    scenario: str,
    policy: str,
    trace: str | None,
    data_dir: str | None,
    synthetic_jobs: int | None = None,
    scale: int = 1,
    unscaled_arrivals: bool = False,
) -> Callable[[], dict[str, Any]]:
    """A run of one policy over a trace, start-up included.

    ``unscaled_arrivals`` drops the scenario's ``workload.load``, so synthetic jobs arrive at
    the generator's own (Philly) rate whatever the cluster can serve.
    """

    def fn() -> dict[str, Any]:
        t0 = time.perf_counter()
        from crius_gym.policies.registry import make_policy
        from crius_gym.scenarios import load_scenario

        sc = load_scenario(scenario)
        if scale != 1:
            sc = scaled_scenario(sc, scale)
        if unscaled_arrivals:
            sc = dataclasses.replace(sc, workload=dataclasses.replace(sc.workload, load=None))
        tuner = sc.make_tuner()
        if trace is not None:
            from crius_gym.workload.arena_trace import load_arena_trace

            tr = load_arena_trace(trace, data_dir, iteration_divisor=sc.workload.iteration_divisor)
        else:
            tr = sc.synthetic_trace("test", 0, num_jobs=synthetic_jobs, tuner=tuner)
        sim = sc.make_simulator(tuner)
        sim.config = dataclasses.replace(sim.config, record_timeseries=False)
        timed = TimedPolicy(make_policy(policy, scenario=sc))
        t1 = time.perf_counter()
        res = sim.run(tr, timed)
        t2 = time.perf_counter()
        return {
            "jobs": len(tr),
            "gpus": sc.cluster.num_gpus,
            "wall_s": t2 - t0,
            "run_s": t2 - t1,
            "jobs_per_s": len(tr) / (t2 - t0),
            "finished": res.summary.finished,
            "rejected": res.summary.rejected,
            "tuner_hit_rate": tuner.cache_hits / max(1, tuner.cache_hits + tuner.cache_misses),
            **timed.latency_stats_ms(),
            **timed.latency_by_queue_ms(),
        }

    return fn


def scaled_scenario(sc: Any, factor: int) -> Any:
    """A scenario with ``factor`` times the nodes of every group (same workload settings)."""
    from crius_gym.hardware.cluster import ClusterSpec

    groups = tuple(
        dataclasses.replace(g, num_nodes=g.num_nodes * factor) for g in sc.cluster.groups
    )
    return dataclasses.replace(
        sc, cluster=ClusterSpec(groups), name=f"{sc.name}x{factor}", _memo={}
    )


def env_steps(scenario: str, steps: int, guide: bool = True) -> Callable[[], dict[str, Any]]:
    """Random masked actions (with the default guide, or without one: v3's window)."""

    def fn() -> dict[str, Any]:
        from crius_gym.env.cluster_env import CriusEnv

        env = CriusEnv(scenario, None if guide else {"guide": None})
        rng = np.random.default_rng(0)
        env.reset(seed=0)
        done, n = False, 0
        t0 = time.perf_counter()
        while n < steps:
            if done:
                env.reset()
            a = int(rng.choice(np.flatnonzero(env.action_masks())))
            _, _, term, trunc, _ = env.step(a)
            done = term or trunc
            n += 1
        dt = time.perf_counter() - t0
        return {"steps": n, "seconds": dt, "steps_per_s": n / dt}

    return fn


#: PPO configurations of the ppo section: overrides of the scenario's agents/ppo.yaml block.
PPO_MODES = {
    "default (vine)": [],
    "sequence baseline": ["vine_fraction=0", "sequences=2"],
    "GAE": ["vine_fraction=0", "sequences=0"],
}


def ppo_steps(scenario: str, mode: str, steps: int, warmup: int) -> Callable[[], dict[str, Any]]:
    """End-to-end training decisions/s (rollouts, vine rollouts and updates) of one mode.

    Measured after ``warmup`` decisions of training, so the vine's replay is past the point
    where its distillation reaches its per-update cap (a run's steady state, not its cheap
    start). ``labels_per_s``: decisions labelled by rollouts (the vine's learning signal).
    """

    def fn() -> dict[str, Any]:
        import torch

        from crius_gym.env.config import EnvConfig
        from crius_gym.rl.ppo import make_model, resolve_hyperparams
        from crius_gym.rl.train import build_vec_env

        torch.set_num_threads(1)
        hp = resolve_hyperparams(scenario, overrides=PPO_MODES[mode])
        venv = build_vec_env(hp, scenario, EnvConfig(**dict(hp.env)), 0)
        model = make_model(hp, venv, 0, None)
        model.learn(warmup)  # tuner caches, workers, and a replay as in a run's steady state
        n0, labels0 = model.num_timesteps, len(model.replay)
        t0 = time.perf_counter()
        model.learn(steps, reset_num_timesteps=False)
        dt = time.perf_counter() - t0
        done = model.num_timesteps - n0
        labelled = len(model.replay) - labels0
        model.close_pool()
        venv.close()
        return {
            "steps": done,
            "seconds": dt,
            "steps_per_s": done / dt,
            "labels_per_s": labelled / dt,
            "n_envs": hp.n_envs,
        }

    return fn


def rollout_rate(
    scenario: str, backend: str, workers: int, decisions: int
) -> Callable[[], dict[str, Any]]:
    """Vine labels per second (crius_gym/rl/rollout_bench.py), env settings of agents/ppo.yaml."""

    def fn() -> dict[str, Any]:
        from crius_gym.env.config import EnvConfig
        from crius_gym.rl.ppo import resolve_hyperparams
        from crius_gym.rl.rollout_bench import rollout_throughput

        hp = resolve_hyperparams(scenario)
        cfg = EnvConfig(**dict(hp.env))
        return rollout_throughput(scenario, cfg, backend, workers, decisions)

    return fn


def dagger_rate(scenario: str, episodes: int, **teacher: Any) -> Callable[[], dict[str, Any]]:
    """The DAgger teacher's labels per second of labelling time, and rollouts per label."""

    def fn() -> dict[str, Any]:
        import numpy as np

        from crius_gym.env.cluster_env import CriusEnv
        from crius_gym.env.config import EnvConfig
        from crius_gym.policies.lookahead_options import LookaheadOptions
        from crius_gym.rl.agent import GreedyActor
        from crius_gym.rl.dagger import collect_dagger
        from crius_gym.rl.saved import load_policy, policy_file, read_metadata
        from crius_gym.scenarios import load_scenario
        from crius_gym.scripts.distill_lookahead import TEACHER_DEFAULTS

        init = policy_file("results/reference_policy")
        cfg = EnvConfig(**dict(read_metadata(init)["env_config"]))
        env = CriusEnv(load_scenario(scenario), cfg)
        model, _ = load_policy(init, env)
        options = LookaheadOptions(**{**TEACHER_DEFAULTS, **teacher})
        t0 = time.perf_counter()
        _, stats = collect_dagger(
            env, GreedyActor(model), options, list(range(episodes)), 1.0, np.random.default_rng(0)
        )
        n = stats.labels + stats.unlabelled
        return {
            "episodes": stats.episodes,
            "labels": stats.labels,
            "episode_s": time.perf_counter() - t0,
            "label_s": stats.label_s,
            "labels_per_s": n / stats.label_s if stats.label_s else float("nan"),
            "ms_per_label": stats.ms_per_label,
            "rollouts_per_label": stats.rollouts_per_label,
            "ms_per_rollout": 1000.0 * stats.label_s / stats.rollouts if stats.rollouts else 0.0,
        }

    return fn


def tuner_time(scenario: str) -> Callable[[], dict[str, Any]]:
    def fn() -> dict[str, Any]:
        from crius_gym.scenarios import load_scenario
        from crius_gym.workload.models import load_model_catalog

        sc = load_scenario(scenario)
        cat = load_model_catalog()
        jobs = [
            (f"{f}-{s}", b)
            for f, sizes, batches in [
                ("bert", ["760m", "1.3b", "2.6b", "6.7b"], [128, 256, 512]),
                ("moe", ["690m", "1.3b", "2.4b", "10b"], [256, 512, 1024]),
                ("wide_resnet", ["500m", "1b", "2b", "4b", "6.8b"], [256, 512, 1024]),
            ]
            for s in sizes
            for b in batches
        ]
        times = []
        for name, batch in jobs:
            tuner = sc.make_tuner()
            t0 = time.perf_counter()
            tuner.tune(cat.get(name), batch)
            times.append(time.perf_counter() - t0)
        a = np.asarray(times) * 1000
        return {
            "jobs": len(jobs),
            "tune_median_ms": float(np.median(a)),
            "tune_p90_ms": float(np.percentile(a, 90)),
            "tune_max_ms": float(a.max()),
        }

    return fn


def megatron_tuner_time(case: str) -> Callable[[], dict[str, Any]]:
    """The tuner in the Megatron-LM plan space.

    ``cold``: every Arena job on the 4-type cluster; ``175b``: one GPT-3 175B Cell of 1,024
    A100 80 GB, every stage count.
    """

    def fn() -> dict[str, Any]:
        from crius_gym.perf.calibration import get_calibration
        from crius_gym.perf.estimator import Estimator
        from crius_gym.perf.framework import get_framework
        from crius_gym.perf.tuner_timing import ARENA_JOBS, cold_tune_ms, large_cell_search

        est = Estimator(get_framework("megatron"), get_calibration("megatron"))
        if case == "175b":
            seconds, priced, _ = large_cell_search(est, 1)
            return {"jobs": 1, "tune_median_ms": seconds * 1000, "plans_priced": priced}
        a = np.asarray(cold_tune_ms(est, 1))
        return {
            "jobs": len(ARENA_JOBS),
            "tune_median_ms": float(np.median(a)),
            "tune_p90_ms": float(np.percentile(a, 90)),
            "tune_max_ms": float(a.max()),
        }

    return fn


# ---------------------------------------------------------------------------- driver
def measure(
    label: dict[str, Any], fn: Callable[[], dict[str, Any]], repeats: int
) -> dict[str, Any]:
    print(f"  {label} ...", flush=True)
    out = {**label, **median_of([isolated(fn) for _ in range(repeats)])}
    shown = {k: (round(v, 3) if isinstance(v, float) else v) for k, v in out.items()}
    print(f"    {shown}", flush=True)
    return out


def reference_loop_s() -> float:
    """CPU seconds of a fixed pure-Python loop: this machine's speed at the moment.

    Shared machines drift (here by up to 1.7x within minutes); the report states the loop's
    time before and after the run so that numbers from two runs can be compared.
    """
    t0 = time.process_time()
    total = 0
    for i in range(10_000_000):
        total += i
    return time.process_time() - t0


def main() -> None:
    args = parse_args()
    loop_before_s = reference_loop_s()
    stem = "benchmark_quick" if args.quick else "benchmark"
    refuse_overwrite([Path(args.out) / f"{stem}.md", Path(args.out) / f"{stem}.csv"], args.force)
    prov = Provenance.capture()
    q = args.quick
    rows: list[dict[str, Any]] = []
    if "sim" in args.sections:
        print("sim: Arena Philly on crius-sim-1280", flush=True)
        for policy in args.policies:
            fn = (
                replay("tiny", policy, None, args.data_dir)
                if q
                else replay("crius-sim-1280", policy, "philly", args.data_dir)
            )
            rows.append(measure({"section": "sim", "case": policy}, fn, args.repeats))
        if not q:
            print("sim: the same in the artifact setting (crius-sim-1280-artifact)", flush=True)
            for policy in args.policies:
                fn = replay("crius-sim-1280-artifact", policy, "philly", args.data_dir)
                case = f"{policy} (artifact setting)"
                rows.append(measure({"section": "sim", "case": case}, fn, args.repeats))
    if "env" in args.sections:
        print("env: random masked actions on hetero-64 (with the guide, and without)", flush=True)
        for guide in (True, False):
            rows.append(
                measure(
                    {"section": "env", "case": "random" if guide else "random, no guide"},
                    env_steps("tiny" if q else "hetero-64", 500 if q else 20_000, guide),
                    args.repeats,
                )
            )
    if "ppo" in args.sections:
        print("ppo: MaskablePPO training on the default mixture", flush=True)
        for mode in PPO_MODES:
            rows.append(
                measure(
                    {"section": "ppo", "case": mode},
                    ppo_steps(
                        "tiny" if q else "mix", mode, 256 if q else 16_384, 256 if q else 40_000
                    ),
                    1,
                )
            )
    if "rollouts" in args.sections:
        print("rollouts: vine labels per second by backend and workers (the mixture)", flush=True)
        for backend, counts in (("process", (0, 1, 2, 4)), ("ray", (1, 2, 4))):
            for workers in counts:
                rows.append(
                    measure(
                        {"section": "rollouts", "case": f"{backend}, {workers} workers"},
                        rollout_rate("tiny" if q else "mix", backend, workers, 20 if q else 400),
                        args.repeats,
                    )
                )
    if "dagger" in args.sections:
        print("dagger: the lookahead teacher's labels on the default mixture", flush=True)
        for case, teacher in (("default teacher", {}), ("teacher, tail=list", {"tail": "list"})):
            rows.append(
                measure(
                    {"section": "dagger", "case": case},
                    dagger_rate("tiny" if q else "mix", 1 if q else 10, **teacher),
                    args.repeats,
                )
            )
    if "tuner" in args.sections:
        print("tuner: cold tuning of every Arena (model, batch) on crius-sim-1280", flush=True)
        rows.append(
            measure(
                {"section": "tuner", "case": "cold"},
                tuner_time("tiny" if q else "crius-sim-1280"),
                args.repeats,
            )
        )
        if not q:  # the Megatron-LM plan space (the estimator's, not a scenario's)
            for case, label in (("cold", "cold, Megatron-LM plan space"), ("175b", "175B Cell")):
                rows.append(
                    measure({"section": "tuner", "case": label}, megatron_tuner_time(case), 1)
                )
    if "scale" in args.sections:
        print("scale: synthetic traces on large clusters", flush=True)
        for policy in ("fcfs", "crius"):
            fn = replay(
                "crius-sim-1280", policy, None, None, synthetic_jobs=200 if q else 20_000, scale=5
            )
            rows.append(measure({"section": "scale", "case": policy}, fn, 1))
        for factor in (1, 4, 16):
            for policy in ("fcfs", "crius"):
                fn = replay(
                    "hetero-64",
                    policy,
                    None,
                    None,
                    synthetic_jobs=(50 if q else 250) * factor,
                    scale=5 * factor,
                )
                rows.append(measure({"section": "growth", "case": f"{policy} {factor}x"}, fn, 1))
    if "overload" in args.sections:
        print("overload: 50,000 jobs at Philly's arrival rate on crius-sim-1280", flush=True)
        for policy in ("fcfs", "crius"):
            fn = replay(
                "tiny" if q else "crius-sim-1280",
                policy,
                None,
                None,
                synthetic_jobs=300 if q else 50_000,
                unscaled_arrivals=True,
            )
            rows.append(measure({"section": "overload", "case": policy}, fn, 1))
    out = Path(args.out)
    df = pd.DataFrame(rows)
    with atomic_path(out / ("benchmark_quick.csv" if q else "benchmark.csv")) as tmp:
        df.to_csv(tmp, index=False)
    lines = [
        "# Benchmarks",
        "",
        prov.markdown(),
        f"Machine: {platform.machine()}, {platform.python_implementation()} "
        f"{platform.python_version()}; medians of {args.repeats} runs where repeated; each "
        "measurement in a fresh process (start-up and trace loading included in `wall_s`).",
        "",
        f"Machine speed: a fixed 10M-step Python loop took {loop_before_s:.2f} s before the run "
        f"and {reference_loop_s():.2f} s after it (lower is faster; compare runs only at similar "
        "speeds, and ratios measured in one run).",
        "",
    ]
    if q:
        lines += ["**Quick mode: tiny sizes, a smoke test, not a measurement.**", ""]
    for section in df["section"].unique():
        part = df[df["section"] == section].dropna(axis=1, how="all")
        lines += [
            f"## {section}",
            "",
            part.drop(columns=["section"]).to_markdown(index=False, floatfmt=".3g"),
            "",
        ]
    verdicts = []
    for (section, case, key), (op, goal, src) in TARGETS.items():
        hit = df[(df["section"] == section) & (df["case"] == case)]
        if q or hit.empty or key not in hit:
            continue
        v = float(hit[key].iloc[0])
        ok = v <= goal if op == "<=" else v >= goal
        verdicts.append(
            f"| {section} {case} {key} | {v:.3g} | {op} {goal:g} | {src} | "
            f"{'met' if ok else 'missed'} |"
        )
    if verdicts:  # none when the sections run have no stated target
        lines += [
            "## Targets",
            "",
            "| measurement | value | target | source | verdict |",
            "| --- | --- | --- | --- | --- |",
            *verdicts,
            "",
        ]
    name = "benchmark_quick.md" if q else "benchmark.md"
    atomic_write_text(out / name, "\n".join(lines))
    print(f"wrote {out / name}")


if __name__ == "__main__":
    run_main(main)
