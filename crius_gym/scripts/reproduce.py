"""Regenerate the committed results: run the stale stages of experiments/pipeline.yaml."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from crius_gym.errors import ConfigError
from crius_gym.pipeline.declaration import load_pipeline
from crius_gym.pipeline.engine import Engine, StageStatus

_DEFAULT = Path(__file__).resolve().parents[2] / "experiments" / "pipeline.yaml"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="reproduce.py",
        description=(
            "Regenerate the committed results under results/. Every committed file there is an "
            "output of one stage of experiments/pipeline.yaml, declared with its inputs (the "
            "scripts and the package modules they import, scenario and hyperparameter files, "
            "data, earlier stages' outputs). The content hashes of each stage's inputs when it "
            "last ran are in results/pipeline.lock.json (doit's record, committed); a stage is "
            "stale when one of them changed. Without options: run every stale stage, in order, "
            "one at a time, each stage's log in results/tmp/reproduce/<stage>.log. An "
            "interrupted run resumes: finished stages are recorded at once and never redone, a "
            "training stage resumes from its last checkpoint, and a killed stage leaves the "
            "previous outputs in place (outputs are staged and moved in only on success). "
            "See docs/pipeline.md."
        ),
    )
    p.add_argument(
        "--status",
        action="store_true",
        help="list every stage with its outputs and its state (up to date, stale and why, "
        "missing, frozen, review) and exit 0",
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="with --status: exit 1 when any committed result is stale or missing",
    )
    p.add_argument(
        "--stage",
        nargs="+",
        metavar="NAME",
        help="run only these stages and the stale stages they need",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --stage: run the named stages even when up to date",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="print what would run, in order, and exit"
    )
    p.add_argument(
        "--all", action="store_true", help="with --dry-run: every stage with its outputs"
    )
    p.add_argument(
        "--accept",
        nargs="+",
        metavar="NAME",
        help="record hand-written (manual) stages as up to date with their current inputs, once "
        "a person has rewritten them against the new results",
    )
    p.add_argument(
        "--adopt",
        action="store_true",
        help="record as up to date each unrecorded stage whose inputs are, by git, the same at "
        "the revision its outputs state and at HEAD (to adopt reports made before the pipeline)",
    )
    p.add_argument(
        "--pipeline",
        type=Path,
        default=_DEFAULT,
        metavar="FILE",
        help="the declaration (default: experiments/pipeline.yaml)",
    )
    p.add_argument(
        "--verbose", action="store_true", help="with --status: list every output of every stage"
    )
    return p


def _print_status(engine: Engine, verbose: bool) -> dict[str, StageStatus]:
    status = engine.status()
    width = max(len(n) for n in status)
    for name, st in status.items():
        stage = engine.pipeline.stages[name]
        print(f"{name:<{width}}  {st.state:<10}  {stage.kind:<7}  {stage.description}")
        for reason in st.reasons:
            print(f"{'':<{width}}    - {reason}")
        if st.note:
            print(f"{'':<{width}}    ({st.note})")
        outs = (
            stage.outputs
            if verbose or len(stage.outputs) <= 3
            else (*stage.outputs[:2], f"... and {len(stage.outputs) - 2} more (--verbose)")
        )
        for out in outs:
            print(f"{'':<{width}}    > {out}")
    counts: dict[str, int] = {}
    for st in status.values():
        counts[st.state] = counts.get(st.state, 0) + 1
    print("\n" + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())))
    return status


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.check and not args.status:
        _parser().error("--check goes with --status")
    if args.force and not args.stage:
        _parser().error("--force goes with --stage")
    if args.all and not args.dry_run:
        _parser().error("--all goes with --dry-run")
    try:
        pipeline = load_pipeline(args.pipeline)
    except ConfigError as exc:
        print(f"reproduce.py: {exc}", file=sys.stderr)
        return 2
    engine = Engine(pipeline)
    names = args.stage or []
    unknown = [n for n in [*names, *(args.accept or [])] if n not in pipeline.stages]
    if unknown:
        known = ", ".join(pipeline.stages)
        print(
            f"reproduce.py: unknown stage(s) {', '.join(unknown)}; known: {known}", file=sys.stderr
        )
        return 2
    if args.status:
        status = _print_status(engine, args.verbose)
        bad = [n for n, st in status.items() if not st.ok]
        if args.check and bad:
            print(f"not up to date: {', '.join(bad)}", file=sys.stderr)
            return 1
        return 0
    if args.accept:
        manual = [n for n in args.accept if pipeline.stages[n].kind != "manual"]
        if manual:
            print(
                f"reproduce.py: --accept is for hand-written stages; {', '.join(manual)} "
                "are made by commands: run them",
                file=sys.stderr,
            )
            return 2
        for name in engine.accept(args.accept):
            print(f"{name}: recorded as up to date")
        return 0
    if args.adopt:
        for name, what in engine.adopt().items():
            print(f"{name}: {what}")
        return 0
    if args.dry_run:
        if args.all:
            for name in engine.pipeline.order():
                stage = pipeline.stages[name]
                print(f"{name} ({stage.kind}): {stage.description}")
                for cmd in stage.cmd:
                    print(f"    $ {' '.join(cmd.split())}")
                for out in stage.outputs:
                    print(f"    > {out}")
            return 0
        plan = engine.plan(names or None, names if args.force else ())
        if not plan:
            print("nothing to run: every stage asked for is up to date")
        for i, name in enumerate(plan, 1):
            print(f"{i}. {name} ({pipeline.stages[name].kind})")
        return 0
    return engine.run(names or None, names if args.force else ())


def cli() -> None:
    sys.exit(main())


if __name__ == "__main__":
    cli()
