"""Evaluate saved PPO policies against the rule-based schedulers on held-out traces.

Every policy — saved agents (run through the env, always with the action mask, deterministic)
and heuristics (run on the simulator) — sees exactly the same traces with the same seed. The
held-out traces of a scenario are its synthetic test split (seeds never used in training) and,
with --traces own/all, its own Arena trace placed on its cluster. --transfer repeats the
evaluation on other scenarios (e.g. a policy trained on hetero-64 run on crius-testbed and
crius-sim-1280: observations do not depend on the cluster size).

Writes to --out: <report-name> (Markdown: per scenario, mean ± 95% CI across traces of avg /
p95 / p99 JCT, avg queueing, avg throughput, makespan, finished / rejected / unfinished, and the
paired change against Crius), evaluation_<scenario>.csv (one row per policy and trace), and
figures under eval_<scenario>/ (JCT CDF, queueing CDF, throughput over time) plus the learning
curves exported from the policies' TensorBoard logs.
"""

from __future__ import annotations

import argparse

from crius_gym.bundled import list_scenarios
from crius_gym.cli import (
    SEED,
    add_data_dir_option,
    add_output_options,
    add_trace_options,
    add_trace_set_options,
    existing_path,
    policy_names_help,
    run_main,
)
from crius_gym.policies.registry import available, default_set

# The evaluation itself (torch, the env, the simulator, plots) lives in
# crius_gym/scripts/evaluation.py and is imported after the arguments are parsed: --help
# answers at once.


def _opt_in() -> list[str]:
    return sorted(set(available()) - set(default_set()))


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--policy",
        nargs="+",
        action="extend",
        default=[],
        type=existing_path,
        metavar="PATH",
        help="saved policies: a model .zip or a results/policies/<run> folder "
        "(its best_model.zip); several after one --policy, or --policy repeated; a zip saved "
        "by plain SB3 / sb3-contrib MaskablePPO runs too (see --env-id)",
    )
    p.add_argument(
        "--env-id",
        metavar="ID",
        help="for a --policy zip saved by plain SB3 / sb3-contrib (no metadata.yaml beside it): "
        "the registered id it was trained on, e.g. crius_gym/Hetero64-v4, with its default "
        "settings (default: --scenario's id); docs/extending.md",
    )
    p.add_argument(
        "--scenario",
        default="hetero-64",
        help=f"scenario whose held-out traces to use; known: {', '.join(list_scenarios())}",
    )
    p.add_argument(
        "--transfer",
        nargs="+",
        action="extend",
        default=[],
        metavar="SCENARIO",
        help="also evaluate on these scenarios (policies trained elsewhere)",
    )
    p.add_argument(
        "--policies",
        nargs="*",
        default=None,
        metavar="NAME",
        help=policy_names_help(
            "heuristics to compare",
            f"all registered but the costly opt-in ones: {', '.join(_opt_in())}",
        ),
    )
    p.add_argument(
        "--policy-option",
        action="append",
        default=[],
        metavar="[SCENARIO:]NAME.KEY=VALUE",
        help="an option of a heuristic's factory (repeatable; VALUE is YAML), on every "
        "scenario or, prefixed, on that scenario only, e.g. "
        "crius-sim-1280:crius-lookahead.horizon_s=3600",
    )
    add_trace_set_options(p, "test", "test")
    p.add_argument(
        "--transfer-traces",
        choices=["test", "own", "all"],
        default="own",
        help="held-out set on the --transfer scenarios (default: own)",
    )
    add_trace_options(
        p,
        "evaluate on this trace file, placed on --scenario's cluster, instead of the scenario's "
        "held-out set; Arena simulate_trace_* files are read with the artifact's iteration "
        "divisor",
        repeatable=True,
    )
    p.add_argument(
        "--guide-margin",
        nargs="+",
        default=["recorded"],
        metavar="M",
        help="how far an agent must prefer its own action over the guide's (Crius's) before it "
        "departs from it, in logits: 'recorded' = the deployment its metadata.yaml records "
        "(margin and envelope, selected on validation by train_ppo.py or "
        "select_guide_margin.py; margin 0 and no envelope if none), or a number ('inf' = the "
        "guide; no envelope). Several values evaluate each policy at each; explicit values "
        "are labelled ppo:<run>@<M> (default: recorded)",
    )
    p.add_argument("--seed", type=SEED, default=0, help="seed of every policy's random generator")
    p.add_argument(
        "--stochastic",
        action="store_true",
        help="sample the agents' actions instead of taking the most likely one",
    )
    add_data_dir_option(p)
    add_output_options(p, "evaluate")
    p.add_argument(
        "--report-name",
        default="evaluation.md",
        help="Markdown report file name in --out (default: evaluation.md)",
    )
    p.add_argument(
        "--notes",
        type=existing_path,
        metavar="FILE",
        help="a hand-written Markdown discussion appended to the report under 'Discussion' "
        "(the tables stay generated)",
    )
    p.add_argument(
        "--ray",
        action="store_true",
        help="fan the (policy, trace) runs out over Ray workers (needs the ray "
        "extra); the table is identical to the serial one",
    )
    p.add_argument("--address", help="join an existing Ray cluster (default: a local one)")
    p.add_argument("--no-progress", action="store_true", help="hide progress bars")
    return p.parse_args()


def main() -> None:
    """Parse the arguments, then run the evaluation."""
    args = parse_args()
    from crius_gym.scripts.evaluation import run

    run(args)


def cli() -> None:
    """Console-script entry point (errors on bad input exit with status 2)."""
    run_main(main)


if __name__ == "__main__":
    cli()
