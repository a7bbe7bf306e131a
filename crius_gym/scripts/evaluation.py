"""The evaluation behind ``experiments/evaluate.py`` and ``crius-evaluate``.

Saved policies and the rule-based schedulers on held-out traces (or given trace files), the
paired change against Crius with its 95% CI, figures and learning curves. The argument parser
is in :mod:`crius_gym.scripts.evaluate`; this module holds the heavy imports.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from tqdm import tqdm

from crius_gym.atomic import atomic_path, atomic_write_text, refuse_overwrite
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.errors import CriusGymError
from crius_gym.eval.curves import plot_learning_curves, read_scalars
from crius_gym.eval.gantt import gantt_file_name, plot_gantt
from crius_gym.eval.headline import headline_frame, headline_markdown
from crius_gym.eval.plots import plot_cdf, plot_throughput
from crius_gym.eval.resume import RunStore
from crius_gym.eval.tables import aggregate, markdown_table, summary_frame
from crius_gym.eval.tasks import AgentTask, HeuristicTask, Task, run_tasks
from crius_gym.eval.trace_sets import check_requests, trace_files, trace_set
from crius_gym.plugins import make_policy
from crius_gym.policies.registry import default_set
from crius_gym.provenance import Provenance
from crius_gym.registration import env_id
from crius_gym.rl.deviation import parse_margin, recorded_deployment
from crius_gym.rl.envelope import Envelope
from crius_gym.rl.saved import load_policy, model_metadata, policy_file
from crius_gym.scenarios import Scenario, load_scenario
from crius_gym.sim.simulator import RunResult
from crius_gym.yamlfile import load_yaml


def policy_options(specs: list[str], scenario: str, policy: str) -> tuple[tuple[str, Any], ...]:
    """The ``--policy-option`` values for ``policy`` on ``scenario``, as sorted pairs.

    Each spec is ``[SCENARIO:]NAME.KEY=VALUE`` (VALUE parsed as YAML); unprefixed specs apply
    to every scenario; a later spec of the same key wins.

    Raises:
        SystemExit: naming the malformed spec.
    """
    out: dict[str, Any] = {}
    for spec in specs:
        where, _, rest = spec.rpartition(":") if ":" in spec.split("=", 1)[0] else ("", "", spec)
        target, eq, value = rest.partition("=")
        name, dot, key = target.rpartition(".")
        if not (eq and dot and name and key):
            raise SystemExit(
                f"--policy-option {spec!r}: expected [SCENARIO:]NAME.KEY=VALUE, "
                "e.g. crius-sim-1280:crius-lookahead.horizon_s=3600"
            )
        if name == policy and where in ("", scenario):
            out[key] = load_yaml(value, f"--policy-option {spec!r}")
    return tuple(sorted(out.items()))


def plain_env_id(args: argparse.Namespace) -> str:
    """The env id of a model saved without ``metadata.yaml`` (plain SB3).

    ``--env-id``, else ``--scenario``'s registered id.
    """
    return str(args.env_id or env_id(load_scenario(args.scenario).name))


def agent_name(path: Path) -> str:
    """``ppo:<run folder>`` for a run's best model, ``ppo:<run folder>/<file>`` otherwise.

    Named after the folder, not the run name recorded inside it: a copied or renamed run keeps
    its own label, so two policies never merge into one row.
    """
    run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
    return f"ppo:{run_dir.name}" + ("" if path.stem == "best_model" else f"/{path.stem}")


def _origin(meta: dict[str, Any]) -> str:
    """How a saved policy was made: PPO training, DAgger distillation or a weight soup.

    Distilled networks and soups carry their init's training keys (timesteps, TensorBoard
    log) in their metadata; naming those as their own training would misstate them.
    """
    if "distilled" in meta:
        d = meta["distilled"] or {}
        return (
            f"distilled from the lookahead by DAgger (round {d.get('round')}, "
            f"{d.get('labels')} pooled labels, from `{d.get('init')}`) on {meta.get('scenario')}"
        )
    if "soup" in meta:
        members = (meta["soup"] or {}).get("members") or []
        return (
            f"a weight average (model soup) of {len(members)} networks "
            f"({', '.join(f'`{m}`' for m in members)}) trained on {meta.get('scenario')}"
        )
    return (
        f"trained on {meta.get('scenario')} for {meta.get('timesteps')} timesteps "
        f"({meta.get('policy')} network, warm start {'yes' if meta.get('warm_start') else 'no'})"
    )


def _own_tensorboard(meta: dict[str, Any]) -> str | None:
    """The policy's own TensorBoard log, None for distilled networks and soups.

    Theirs is their init's, whose PPO curve is not how they were made.
    """
    if "distilled" in meta or "soup" in meta:
        return None
    tb = meta.get("tensorboard")
    return str(tb) if tb else None


def _selection(path: Path) -> str:
    """How the model was selected: its validation score beside the test results below."""
    if path.stem != "best_model":
        return ""
    evals = path.parent / "evaluations.csv"
    if not evals.is_file():
        return ""
    df = pd.read_csv(evals)
    if "eval_jct_ratio" not in df:
        return ""
    best = df.sort_values(["eval_unfinished", "eval_jct_ratio"]).iloc[0]
    sets = {
        str(k)[len("eval_jct_ratio[") : -1]: float(v)
        for k, v in best.items()
        if str(k).startswith("eval_jct_ratio[") and not pd.isna(v)
    }
    per_set = (
        " (the mean over validation scenarios of their mean ratio: "
        + ", ".join(f"{name} {v:.3f}" for name, v in sets.items())
        + ")"
        if sets
        else ""
    )
    return (
        f" Selected at {int(best['timesteps']):,} timesteps by validation: average JCT "
        f"{best['eval_jct_ratio']:.3f}× Crius's (95% CI ± {best['eval_jct_ratio_ci95']:.3f}) "
        f"on {int(best['eval_traces'])} validation traces{per_set}, throughput "
        f"{best['eval_throughput_ratio']:.3f}×."
    )


def _deployment(meta: dict[str, Any]) -> str:
    """The recorded guide margin and how it was chosen."""
    block = meta.get("deployment")
    if not block:
        return " Deployed without a guide margin (departs from Crius wherever its argmax does)."
    scores = block.get("scores") or {}
    return (
        f" Deployed with guide margin δ = {block.get('guide_margin')} (departs from Crius only "
        f"where it prefers its own action by ≥ δ logits), chosen on validation traces "
        f"({', '.join(f'{k}: {v}' for k, v in (block.get('validation_traces') or {}).items())}):"
        f" {block.get('score', 'score')}: {scores.get(str(block.get('guide_margin')), '?')} "
        f"against {scores.get('0.0', '?')} at δ = 0, by `{block.get('selected_by')}`."
        + (
            f" Envelope: Crius decides wherever more than {block['max_waiting']} jobs wait"
            + (
                f" or more than {block['max_running']} run"
                if block.get("max_running") is not None
                else ""
            )
            + f" ({block.get('envelope', '')})."
            if block.get("max_waiting") is not None
            else ""
        )
    )


def evaluate_scenario(
    scenario: Scenario,
    which: str,
    args: argparse.Namespace,
    heuristics: list[str],
    prov: Provenance,
    out: Path,
    files: list[str] | None = None,
) -> tuple[str, pd.DataFrame]:
    agents: list[tuple[str, Path, dict[str, Any], float, Envelope | None]] = []
    gym_id = plain_env_id(args)
    for spec in args.policy:
        path = policy_file(spec)
        meta = model_metadata(path, gym_id)
        env = CriusEnv(scenario, EnvConfig(**meta["env_config"]))
        load_policy(path, env, gym_id)  # refuse incompatible policies before any work
        for how in args.guide_margin:
            name = agent_name(path) + ("" if how == "recorded" else f"@{how}")
            if any(name == a[0] for a in agents):
                raise SystemExit(
                    f"--policy: two policies are both labelled {name!r}; pass each once"
                )
            if how == "recorded":
                margin, envelope = recorded_deployment(path, meta)
            else:
                margin, envelope = parse_margin(how), None
            agents.append((name, path, meta["env_config"], margin, envelope))
    options = {h: policy_options(args.policy_option, scenario.name, h) for h in heuristics}
    tuner = CriusEnv(scenario).tuner
    traces = (
        trace_files(
            files,
            tuner,
            trace_format=args.trace_format,
            trace_seed=args.trace_seed,
            max_traces=args.max_traces,
        )
        if files
        else trace_set(scenario, which, tuner, data_dir=args.data_dir, max_traces=args.max_traces)
    )
    moved = check_requests(traces, scenario.cluster.gpu_types, strict=args.strict)
    print(
        f"{scenario.name}: {len(traces)} traces ({', '.join(t.name for t in traces)}), "
        f"{len(agents)} agents, heuristics {', '.join(heuristics)}"
        + (" on Ray" if args.ray else ""),
        flush=True,
    )
    tasks: list[Task] = [
        AgentTask(
            name,
            str(path),
            scenario.path or scenario.name,
            env_cfg,
            trace,
            args.seed,
            not args.stochastic,
            0.0 if args.stochastic else margin,
            None if args.stochastic else envelope,
            gym_id,
        )
        for name, path, env_cfg, margin, envelope in agents
        for trace in traces
    ] + [
        HeuristicTask(
            h,
            scenario.path or scenario.name,
            trace,
            args.seed,
            data_dir=args.data_dir,
            options=options[h],
        )
        for h in heuristics
        for trace in traces
    ]
    bar = tqdm(total=len(tasks), desc=scenario.name, unit="run", disable=args.no_progress)
    t0 = time.perf_counter()

    def advance(finished: int, _total: int) -> None:
        bar.update(finished - bar.n)

    store = RunStore(out)  # runs of an interrupted call with this --out are reused
    done = run_tasks(tasks, use_ray=args.ray, address=args.address, on_done=advance, store=store)
    if store.reused:
        print(f"{scenario.name}: {store.reused} run(s) reused from {store.folder}", flush=True)
    bar.close()
    wall = time.perf_counter() - t0
    results: list[RunResult] = [d.result for d in done]
    invalid: dict[str, int] = {}
    for task, d in zip(tasks, done, strict=True):
        invalid[task.label] = invalid.get(task.label, 0) + d.invalid_actions
    summ = summary_frame(results)
    summ["wall_s"] = [d.wall_s for d in done]
    with atomic_path(out / f"evaluation_{scenario.name}.csv") as tmp:
        summ.to_csv(tmp, index=False)
    fig_dir = out / f"eval_{scenario.name}"
    fig_dir.mkdir(parents=True, exist_ok=True)
    caption = prov.markdown().replace("`", "")
    plot_cdf(results, "jct_s", fig_dir / "jct_cdf.png", caption, f"JCT CDF — {scenario.name}")
    plot_cdf(
        results,
        "queueing_s",
        fig_dir / "queueing_cdf.png",
        caption,
        f"Queueing delay CDF — {scenario.name}",
    )
    plot_throughput(
        results, fig_dir / "throughput.png", caption, f"Throughput (first trace) — {scenario.name}"
    )
    first: dict[str, RunResult] = {}  # each policy's run of the first trace, in table order
    for r in results:
        if r.trace == results[0].trace:
            first.setdefault(r.policy, r)
    for policy, r in first.items():  # each policy's schedule on the first trace
        title = f"{policy} — {scenario.name}: {r.trace}"
        plot_gantt(r, scenario.cluster, fig_dir / gantt_file_name(policy), caption, title)
    ref = "crius" if "crius" in heuristics else None
    agg = aggregate(summ, reference=ref)
    headline = (
        [
            "**Headline** (each agent as given, `@0` = the bare network: no margin, no "
            "envelope; ratios paired per trace, mean ± 95% CI over the `traces` column's n "
            "traces; the JCT is the average with dropped jobs censored at the end of the run, "
            "so dropping jobs never helps; *mean of N agents* pools the agents of one "
            "deployment over seeds and traces, [95% interval] from a bootstrap resampling both "
            "(crius_gym/eval/headline.py); ms / decision = wall time of the run, simulation "
            "included, per decision):",
            "",
            headline_markdown(headline_frame(summ, [a[0] for a in agents], ref)),
            "",
            "All metrics:",
            "",
        ]
        if ref is not None
        else []
    )
    agent_notes = "; ".join(f"{name}: {invalid[name]} invalid actions" for name, *_ in agents)
    lines = [
        f"## {scenario.name} — {'trace files' if files else f'{which} traces'}",
        "",
        f"{scenario.description}",
        "",
        f"Traces: {', '.join(f'`{t.name}` ({len(t)} jobs)' for t in traces)}. "
        "Mean ± 95% CI across traces (Student t); the change against Crius is paired per trace "
        "(negative JCT = better than Crius).",
        "",
        *([f"- {m}." for m in moved] + [""] if moved else []),
        *headline,
        markdown_table(agg, reference=ref),
        "",
        f"{len(tasks)} runs in {wall:.0f} s{' on Ray' if args.ray else ''}."
        + (f" {agent_notes}." if agent_notes else ""),
        "",
        f"![JCT CDF](eval_{scenario.name}/jct_cdf.png) "
        f"![queueing CDF](eval_{scenario.name}/queueing_cdf.png) "
        f"![throughput](eval_{scenario.name}/throughput.png)",
        "",
        f"Schedules on `{results[0].trace}` (Gantt charts, written by the command above and "
        "not committed: bulky): "
        + ", ".join(f"[{p}](eval_{scenario.name}/{gantt_file_name(p)})" for p in first)
        + ".",
        "",
    ]
    print(markdown_table(agg, reference=ref), flush=True)
    return "\n".join(lines), agg


def check_heuristics(
    scenarios: list[Scenario], heuristics: list[str], option_specs: list[str]
) -> None:
    """Build every heuristic once on every scenario with its options.

    A bad name or option fails before the first run, not after hours of the others.
    """
    for scenario in scenarios:
        for h in heuristics:
            opts = dict(policy_options(option_specs, scenario.name, h))
            option = "--policy-option" if opts else "--policies"
            try:
                make_policy(h, scenario=scenario, option=option, **opts)
            except CriusGymError:
                raise  # names the policy, the option and any file itself
            except (TypeError, ValueError) as exc:
                raise SystemExit(f"--policy-option for {h} on {scenario.name}: {exc}") from None


def run(args: argparse.Namespace) -> None:
    """The evaluation ``crius-evaluate`` / ``experiments/evaluate.py`` runs (see its --help)."""
    torch.set_num_threads(1)
    prov = Provenance.capture()
    out = Path(args.out)
    names = [load_scenario(args.scenario).name, *(load_scenario(n).name for n in args.transfer)]
    if not RunStore(out).folder.is_dir():  # else: an interrupted call's own partial outputs
        refuse_overwrite(
            [
                out / args.report_name,
                out / "learning_curve.png",
                *(out / f"evaluation_{n}.csv" for n in names),
                *(out / f"eval_{n}" for n in names),
            ],
            args.force,
        )
    out.mkdir(parents=True, exist_ok=True)
    heuristics = list(args.policies) if args.policies is not None else list(default_set())
    check_heuristics(
        [load_scenario(args.scenario), *(load_scenario(n) for n in args.transfer)],
        heuristics,
        args.policy_option,
    )
    sections = ["# PPO vs rule-based schedulers on held-out traces", "", prov.markdown(), ""]
    for spec in args.policy:
        path = policy_file(spec)
        meta = model_metadata(path, plain_env_id(args))
        sections.append(
            f"- `{agent_name(path)}`: `{path}`, {_origin(meta)} by `{meta.get('command')}` "
            f"(git {meta.get('git_revision')})." + _selection(path) + _deployment(meta)
        )
    sections.append("")
    scenario = load_scenario(args.scenario)
    text, _ = evaluate_scenario(scenario, args.traces, args, heuristics, prov, out, args.trace)
    sections.append(text)
    for name in args.transfer:
        text, _ = evaluate_scenario(
            load_scenario(name), args.transfer_traces, args, heuristics, prov, out
        )
        sections.append(text)
    curves = {}
    for spec in args.policy:
        path = policy_file(spec)
        meta = model_metadata(path, plain_env_id(args))
        tb = _own_tensorboard(meta)
        if tb and Path(tb).is_dir():
            curves[agent_name(path)] = read_scalars(tb)
    if curves:
        plot_learning_curves(curves, out / "learning_curve.png", prov.markdown().replace("`", ""))
        for name, df in curves.items():
            stem = name.split(":")[-1].replace("/", "_")
            with atomic_path(out / f"learning_curve_{stem}.csv") as tmp:
                df.to_csv(tmp, index=False)
        sections += [
            "## Learning curves",
            "",
            "Validation average JCT (on the scenario's validation traces, Crius on "
            "the same traces dashed) and training return, exported from TensorBoard.",
            "",
            "![learning curve](learning_curve.png)",
            "",
        ]
    if args.notes:
        sections += [
            "## Discussion",
            "",
            f"_Hand-written commentary ({args.notes}) on the generated tables above._",
            "",
            Path(args.notes).read_text(encoding="utf-8"),
            "",
        ]
    atomic_write_text(out / args.report_name, "\n".join(sections))
    RunStore(out).clear()  # every report is written: the stored runs are no longer needed
    print(f"wrote {out / args.report_name}")
