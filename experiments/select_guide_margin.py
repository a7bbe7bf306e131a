"""Choose a saved agent's guide margin δ on validation traces and record it with the policy.

The deployed agent departs from the Crius guide only where it prefers its own action by at
least δ logits (`crius_gym/rl/deviation.py` explains why and how δ is scored). This runs each
candidate δ on the validation traces of every component of the policy's training mixture and
of its validation scenarios — never on test or Arena traces — prints the table, writes it to
--out as Markdown and CSV, and (unless --dry-run) stores the chosen δ in the policy's
metadata.yaml, where `experiments/evaluate.py` reads it. With --envelope-episodes N it first
measures the agent's envelope (the most jobs it saw waiting, and running, on N episodes of its
training distribution; where more wait or run, the guide decides), selects δ with it and records
it too.
`train_ppo.py` does the same at the end of every run; this script re-selects for an existing
policy, e.g.

    python experiments/select_guide_margin.py --policy results/reference_policy
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import torch

from crius_gym.atomic import atomic_path, atomic_write_text, refuse_overwrite
from crius_gym.cli import COUNT, NONNEG_INT, POSITIVE, add_output_options, run_main
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.errors import RunStateError
from crius_gym.provenance import Provenance
from crius_gym.rl.deviation import (
    DEFAULT_MARGINS,
    SCORES,
    measure_envelope,
    parse_margin,
    record_selection,
    select_guide_margin,
    selection_scenarios,
)
from crius_gym.rl.envelope import Envelope
from crius_gym.rl.saved import load_policy, policy_file, read_metadata
from crius_gym.scenarios import load_scenario
from crius_gym.yamlfile import load_yaml_file


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--policy",
        required=True,
        nargs="+",
        help="run folders (results/policies/<run>, results/reference_policy); each is "
        "selected on its own best_model.zip (else model.zip)",
    )
    p.add_argument(
        "--traces", type=COUNT, default=4, help="validation traces per scenario (default: 4)"
    )
    p.add_argument(
        "--margins",
        default=",".join("inf" if math.isinf(m) else f"{m:g}" for m in DEFAULT_MARGINS),
        help="comma-separated candidate δ in logits ('inf' = the guide; default: %(default)s)",
    )
    p.add_argument(
        "--scenarios",
        nargs="*",
        help="validation scenarios besides the training scenario's components (default: the "
        "run's eval_scenarios from its config.yaml)",
    )
    p.add_argument(
        "--score",
        choices=SCORES,
        default="mean",
        help="combine the scenarios' mean JCT ratios by their mean (default) or their worst",
    )
    p.add_argument(
        "--stress-traces",
        type=NONNEG_INT,
        default=0,
        help="long overloaded validation traces per scenario, scored like a scenario of their "
        "own (default: 0 = none)",
    )
    p.add_argument(
        "--stress-load", type=POSITIVE, default=1.2, help="their offered load (default: 1.2)"
    )
    p.add_argument(
        "--stress-jobs", type=COUNT, default=600, help="their length in jobs (default: 600)"
    )
    p.add_argument(
        "--envelope-episodes",
        type=NONNEG_INT,
        default=0,
        help="measure the agent's envelope on this many training episodes and select δ with "
        "it (default: 0 = no envelope; train_ppo.py's default config uses 100)",
    )
    add_output_options(
        p,
        "guide-margin",
        force_help="replace existing outputs in --out and a deployment already recorded in a "
        "policy's metadata.yaml (never by default)",
    )
    p.add_argument("--dry-run", action="store_true", help="print and write the table only")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(1)
    margins = [parse_margin(m) for m in args.margins.split(",")]
    prov = Provenance.capture()
    command = prov.command  # as the report header states it (a pipeline stage: results/)
    out = Path(args.out)
    refuse_overwrite([out / "guide_margin.md", out / "guide_margin.csv"], args.force)
    if not args.dry_run and not args.force:
        recorded = [s for s in args.policy if read_metadata(policy_file(Path(s))).get("deployment")]
        if recorded:
            raise RunStateError(
                f"{', '.join(recorded)}: a guide margin is already recorded in metadata.yaml; "
                "pass --force to replace it, or --dry-run to only compare"
            )
    rows = []
    envelopes: dict[str, Envelope] = {}
    for spec in args.policy:
        run_dir = Path(spec)
        path = policy_file(run_dir)
        meta = read_metadata(path)
        cfg = EnvConfig(**meta["env_config"])
        training = load_scenario(meta["scenario"])
        extra = args.scenarios
        if extra is None:
            conf = run_dir / "config.yaml"
            saved = load_yaml_file(conf) or {} if conf.is_file() else {}
            extra = list((saved.get("hyperparams") or {}).get("eval_scenarios") or [])
        scenarios = selection_scenarios(training, extra)
        model, _ = load_policy(path, CriusEnv(scenarios[0], cfg))
        print(f"{run_dir}: {len(scenarios)} scenarios × {len(margins)} margins", flush=True)
        t0 = time.perf_counter()
        envelope = None
        if args.envelope_episodes:
            envelope = measure_envelope(model, cfg, training, args.envelope_episodes)
            envelopes[run_dir.name] = envelope
            print(
                f"{run_dir}: envelope {envelope.describe()} "
                f"({args.envelope_episodes} training episodes)",
                flush=True,
            )
        sel = select_guide_margin(
            model,
            cfg,
            scenarios,
            args.traces,
            margins,
            log=lambda s: print(s, flush=True),
            score=args.score,
            stress_traces=args.stress_traces,
            stress_load=args.stress_load,
            stress_jobs=args.stress_jobs,
            envelope=envelope,
            envelope_episodes=args.envelope_episodes,
        )
        print(
            f"{run_dir}: δ = {sel.guide_margin:g} (score {sel.scores[sel.guide_margin]:.4f}; "
            f"δ=0: {sel.scores.get(0.0, math.nan):.4f}) in {time.perf_counter() - t0:.0f} s",
            flush=True,
        )
        for (name, m), v in sel.per_scenario.items():
            rows.append(
                {"policy": run_dir.name, "scenario": name, "guide_margin": m, "jct_ratio": v}
            )
        for m, v in sel.scores.items():
            rows.append(
                {"policy": run_dir.name, "scenario": "(score)", "guide_margin": m, "jct_ratio": v}
            )
        if not args.dry_run:
            record_selection(run_dir, sel, command)
            print(f"recorded in {run_dir / 'metadata.yaml'}", flush=True)
    df = pd.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    with atomic_path(out / "guide_margin.csv") as tmp:
        df.to_csv(tmp, index=False)
    wide = df.pivot_table(
        index=["policy", "scenario"], columns="guide_margin", values="jct_ratio", sort=False
    )
    wide.columns = [("δ=" + ("inf" if math.isinf(c) else f"{c:g}")) for c in wide.columns]
    text = "\n".join(
        [
            "# Guide margin: validation JCT ratio to Crius by δ",
            "",
            prov.markdown(),
            "",
            f"Command: `{command}`. "
            + (
                f"Every δ runs inside the agent's envelope (measured on {args.envelope_episodes} "
                "training episodes; where more jobs wait, or run, than it saw there, Crius "
                "decides): " + ", ".join(f"{k} {v.describe()}" for k, v in envelopes.items()) + ". "
                if args.envelope_episodes
                else ""
            )
            + f"Validation traces only ({args.traces} per scenario, and "
            f"{args.stress_traces} of {args.stress_jobs} jobs at load {args.stress_load:g} per "
            "scenario, the rows `<scenario>@<load>x<jobs>`); "
            f"`(score)` is the {args.score} over scenarios, and the smallest δ within 0.002 of "
            "the best score is chosen (crius_gym/rl/deviation.py).",
            "",
            wide.reset_index().to_markdown(index=False, floatfmt=".4f"),
            "",
        ]
    )
    atomic_write_text(out / "guide_margin.md", text)
    print(text)


if __name__ == "__main__":
    run_main(main)
