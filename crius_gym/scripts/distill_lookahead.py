"""Distil the lookahead scheduler (crius-lookahead) into the network by DAgger rounds.

Round k runs --episodes training episodes of --scenario (the env settings of --init), driven
by the best network so far with probability 1 − β_k (β_k = --beta × --beta-decay^k; round 0
with the default β = 1 is driven by the teacher), and labels every state where the env offers a
choice with the lookahead's best action among those the env can express (its rollouts hold only
the jobs already arrived: no label reads the episode's future). The labels of all rounds so far
are pooled, and a network starting from --init's weights is trained on them by masked
cross-entropy (--epochs passes, Adam at --lr; 10% of the states held out to measure agreement;
with --weights regret, each label weighed by what a wrong choice costs there; with
--soft-temperature, each label spread over the teacher's candidates by their rollout costs).
Its bare network (no guide margin, no envelope) is then scored on the first --val-traces
validation traces of every --val-scenarios scenario (mean over scenarios of the mean JCT ratio
to Crius); a round is kept when it beats the best kept one (the init counts as round −1) by more
than --tolerance, and the best kept network drives the next round.

With --teacher network the teacher is the network lookahead instead
(`crius_gym/rl/network_lookahead.py`): the best kept network so far proposes its top actions
and waiting, each rolled out with that network deciding the rest (truncated, the rest valued by
the upgrade schedule), and the cheapest is the label; a round is then a round of expert
iteration, the distilled policy labelling the next round through its own lookahead.

Resumable: each round's labels (labels.npz), network (model.zip, metadata.yaml) and record
(distill.yaml) are written as they finish; rerun the same command to go on. Writes
--out/<name>/distill.md and distill.csv with the command and git revision; the policy folders
are --out/<name>/round<k>/ and run with ``evaluate.py --policy``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from crius_gym.cli import COUNT, NONNEG, NONNEG_INT, POSITIVE, SEED, Number, key_values, run_main
from crius_gym.provenance import Provenance

VAL_SCENARIOS = ["hetero-64", "crius-testbed", "crius-sim-1280-crowd"]
CHUNK = 10
"""Episodes labelled between saves."""
TEACHER_DEFAULTS = {"running_jobs": 4, "horizon_s": 3600.0}
NETWORK_TEACHER_DEFAULTS = {"top_k": 4, "horizon_s": 28800.0}


FRACTION = Number(float, 0.0, 1.0)
"""A probability."""


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--name", default="dagger", help="name of this run (default: dagger)")
    p.add_argument(
        "--init",
        default="results/reference_policy",
        help="saved policy whose weights and env settings every round starts from "
        "(default: results/reference_policy)",
    )
    p.add_argument("--scenario", default="mix", help="training scenario (default: mix)")
    p.add_argument("--rounds", type=COUNT, default=3, help="DAgger rounds (default: 3)")
    p.add_argument(
        "--episodes", type=COUNT, default=100, help="labelled episodes per round (default: 100)"
    )
    p.add_argument(
        "--beta",
        type=FRACTION,
        default=1.0,
        help="round 0's probability of executing the teacher's label (default: 1)",
    )
    p.add_argument(
        "--beta-decay",
        type=FRACTION,
        default=0.0,
        help="β of round k is --beta × this^k (default: 0: later rounds follow the network)",
    )
    p.add_argument(
        "--epochs", type=COUNT, default=10, help="cross-entropy passes per round (default: 10)"
    )
    p.add_argument(
        "--lr", type=POSITIVE, default=3e-4, help="Adam learning rate of the distillation"
    )
    p.add_argument(
        "--weights",
        choices=["none", "regret"],
        default="none",
        help="weigh each label's cross-entropy: none (all equal) or regret (by what a wrong "
        "choice costs there: the teacher's mean relative rollout cost of its other candidates "
        "above its choice, scaled to mean 1 and clipped to [0.1, 10]; labels recorded before "
        "regrets were count as the mean) (default: none)",
    )
    p.add_argument(
        "--soft-temperature",
        type=NONNEG,
        default=0.0,
        help="train on soft targets instead of hard labels: a candidate whose rollout costs a "
        "fraction x more than the teacher's cheapest gets weight exp(-x / T) (e.g. 0.01: 1%% "
        "costlier, weight 1/e); labels recorded without costs keep their hard label (default: "
        "0, hard labels)",
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="teacher option (repeatable): a LookaheadOptions field (defaults: running_jobs=4, "
        "horizon_s=3600), or with --teacher network a NetworkLookaheadOptions field (defaults: "
        "top_k=4, horizon_s=28800)",
    )
    p.add_argument(
        "--teacher",
        dest="teacher_kind",
        choices=["lookahead", "network"],
        default="lookahead",
        help="lookahead: crius-lookahead (Crius as the rollout policy; default); network: the "
        "best kept network's own lookahead (expert iteration)",
    )
    p.add_argument(
        "--policy-kwargs",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a network option (the rowwise network's policy_kwargs, e.g. relative_cells=true; "
        "repeatable): every round then distils into a network with the init's options changed "
        "by these. Options that add terms (relative_cells, queue_context) keep the init's "
        "weights with the new terms at zero, so it starts as the init; others (e.g. hidden) "
        "start fresh, the residual at zero, so it starts as the guide (default: none)",
    )
    p.add_argument(
        "--env-set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change an env setting of --init (EnvConfig field; repeatable), e.g. "
        "cells_per_job=12 to show the teacher's moves: the rowwise network's weights do not "
        "depend on the counts of rows, so the init's are carried over to a network for the "
        "new spaces (saved as <run>/init, round -1) (default: none)",
    )
    p.add_argument(
        "--prior-labels",
        nargs="+",
        default=[],
        metavar="FILE",
        help="labels of earlier runs (their round<k>/labels.npz, of the same env spaces) pooled "
        "into every round's training set, so a round adds to what the network was taught "
        "instead of replacing it (default: none)",
    )
    p.add_argument(
        "--val-scenarios",
        nargs="+",
        default=VAL_SCENARIOS,
        help=f"validation scenarios of the keep rule (default: {' '.join(VAL_SCENARIOS)})",
    )
    p.add_argument(
        "--val-traces",
        type=NONNEG_INT,
        default=4,
        help="validation traces per scenario (default: 4; 0: no validation, every round kept)",
    )
    p.add_argument(
        "--tolerance",
        type=NONNEG,
        default=0.002,
        help="a round is kept when its score is below the best kept by more than this",
    )
    p.add_argument("--seed", type=SEED, default=0, help="seed of episodes and training")
    p.add_argument(
        "--out",
        default="results/tmp/distill",
        help="root of the run folder (default: results/tmp/distill)",
    )
    return p.parse_args(argv)


def _teacher_options(items: list[str], kind: str = "lookahead") -> Any:
    if kind == "network":
        from crius_gym.rl.network_lookahead import NetworkLookaheadOptions

        given: dict[str, Any] = {**NETWORK_TEACHER_DEFAULTS, **key_values(items, "--set")}
        try:
            return NetworkLookaheadOptions(**given)
        except (TypeError, ValueError) as exc:
            raise SystemExit(f"--set: {exc}") from None
    from crius_gym.policies.lookahead import LookaheadOptions

    opts: dict[str, Any] = {**TEACHER_DEFAULTS, **key_values(items, "--set")}
    try:
        return LookaheadOptions(**opts)
    except TypeError as exc:
        raise SystemExit(f"--set: {exc}") from None


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # The RL stack is imported here: --help answers at once.
    import numpy as np
    import pandas as pd
    import torch
    import yaml

    from crius_gym.atomic import atomic_write_text
    from crius_gym.env.cluster_env import CriusEnv
    from crius_gym.env.config import EnvConfig
    from crius_gym.rl.agent import GreedyActor
    from crius_gym.rl.dagger import (
        LabelStats,
        collect_dagger,
        load_demonstrations,
        pool,
        save_demonstrations,
    )
    from crius_gym.rl.expert_iteration import bare_validation, mean_score
    from crius_gym.rl.imitation import (
        Demonstrations,
        agreement,
        behaviour_clone,
        regret_weights,
        soft_targets,
        teacher_regret,
    )
    from crius_gym.rl.network_lookahead import NetworkTeacher
    from crius_gym.rl.saved import load_policy, policy_file, read_metadata, write_metadata
    from crius_gym.scenarios import load_scenario
    from crius_gym.yamlfile import load_yaml_file

    prov = Provenance.capture()
    teacher = _teacher_options(args.set, args.teacher_kind)
    folder = Path(args.out) / args.name
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / "distill.yaml"
    # More rounds may follow a finished run; every other setting must stay.
    # The teacher is compared by its resolved options, not by how --set spelt them.
    settings = {k: v for k, v in vars(args).items() if k not in ("rounds", "set", "teacher_kind")}
    if args.weights == "none":
        del settings["weights"]  # as runs from before the option recorded it
    if not args.soft_temperature:
        del settings["soft_temperature"]
    if not args.env_set:
        del settings["env_set"]  # as runs from before the option recorded it
    if not args.prior_labels:
        del settings["prior_labels"]
    settings["teacher"] = {k: v for k, v in teacher.__dict__.items()}
    if args.teacher_kind == "network":  # runs of the lookahead teacher keep their records
        settings["teacher"] = {"kind": "network", **settings["teacher"]}
    records: list[dict[str, Any]] = []
    if log_path.is_file():
        saved = load_yaml_file(log_path) or {}
        recorded = dict(saved.get("settings") or {})
        recorded.pop("set", None)  # recorded by runs before the comparison ignored it
        if recorded != settings:
            raise SystemExit(
                f"{log_path}: written with other settings; use another --name or remove it"
            )
        records = list(saved.get("rounds") or [])

    def write_log() -> None:
        atomic_write_text(
            log_path, yaml.safe_dump({"settings": settings, "rounds": records}, sort_keys=False)
        )

    init = policy_file(args.init)
    meta = read_metadata(init)
    try:
        cfg = EnvConfig(**{**dict(meta["env_config"]), **key_values(args.env_set, "--env-set")})
    except TypeError as exc:
        raise SystemExit(f"--env-set: {exc}") from None
    env = CriusEnv(load_scenario(args.scenario), cfg)
    if args.env_set:
        init = _transfer_init(init, meta, env, folder / "init", prov)
        meta = read_metadata(init)
    torch.manual_seed(args.seed)

    best_path: Path = init
    best_score = math.inf
    if args.val_traces:
        init_rec = next((r for r in records if r["round"] == -1), None)
        if init_rec is None:
            print(f"validating the initial network {init} ...", flush=True)
            first = bare_validation(init, args.val_scenarios, args.val_traces)
            init_rec = {
                "round": -1,
                "policy": str(init),
                "per_scenario": first,
                "score": mean_score(first),
                "kept": True,
            }
            records.append(init_rec)
            write_log()
        best_score = float(init_rec["score"])
    for rec in records:
        if rec["round"] >= 0 and rec["kept"]:
            best_path, best_score = Path(rec["policy"]), float(rec["score"])

    parts: list[Demonstrations] = [load_demonstrations(f) for f in args.prior_labels]
    if parts:
        print(f"pooling {sum(len(d) for d in parts)} prior labels into every round", flush=True)
    for k in range(args.rounds):
        rdir = folder / f"round{k}"
        rdir.mkdir(exist_ok=True)
        labels_file = rdir / "labels.npz"
        done = next((r for r in records if r["round"] == k), None)
        if labels_file.is_file():
            demos = load_demonstrations(labels_file)
            stats_rec = (done or {}).get("labelling") or load_yaml_file(rdir / "labelling.yaml")
        else:
            beta = args.beta * (args.beta_decay**k if k else 1.0)
            print(
                f"round {k}: labelling {args.episodes} episodes, driven by "
                f"{best_path} (β = {beta:g})",
                flush=True,
            )
            driver, _ = load_policy(policy_file(best_path), env)
            chunks: list[Demonstrations] = []
            total = LabelStats()
            for c, start in enumerate(range(0, args.episodes, CHUNK)):
                # Saved every CHUNK episodes: an interrupted round goes on from its last chunk.
                part = rdir / f"part{c:03d}.npz"
                if not part.is_file():
                    stop = min(start + CHUNK, args.episodes)
                    seeds = [args.seed * 1_000_003 + k * 10_007 + i for i in range(start, stop)]
                    got, stats = collect_dagger(
                        env,
                        GreedyActor(driver),
                        teacher
                        if args.teacher_kind == "lookahead"
                        else NetworkTeacher(driver, teacher),
                        seeds,
                        beta,
                        np.random.default_rng([args.seed, k, c]),
                        log=print,
                    )
                    atomic_write_text(part.with_suffix(".yaml"), yaml.safe_dump(asdict(stats)))
                    save_demonstrations(got, part)
                chunks.append(load_demonstrations(part))
                total += LabelStats(**(load_yaml_file(part.with_suffix(".yaml")) or {}))
                print(f"  chunk {c}: {total.labels} labels so far", flush=True)
            demos = pool(chunks)
            stats_rec = {"beta": beta, "driver": str(best_path), **total.summary()}
            save_demonstrations(demos, labels_file)
            atomic_write_text(rdir / "labelling.yaml", yaml.safe_dump(stats_rec))
            for c in range(len(chunks)):  # the round's file holds them all now
                (rdir / f"part{c:03d}.npz").unlink()
        parts.append(demos)
        if done is not None:
            continue
        data = pool(parts)
        rng = np.random.default_rng([args.seed, k, 1])
        order = rng.permutation(len(data))
        cut = max(1, len(data) // 10)

        held, train = data.subset(order[:cut]), data.subset(order[cut:])
        model = _start_model(init, env, args.policy_kwargs, args.seed + k)
        before = agreement(model, held)
        print(
            f"round {k}: distilling {len(train)} labels ({len(held)} held out; "
            f"agreement before {before:.3f})",
            flush=True,
        )
        weights = (
            regret_weights(train.regrets)
            if args.weights == "regret" and train.regrets is not None
            else None
        )
        fit = behaviour_clone(
            model,
            train,
            args.epochs,
            seed=args.seed + k,
            learning_rate=args.lr,
            value_coef=0.0,
            weights=weights,
            targets=(
                soft_targets(train.costs, train.actions, args.soft_temperature)
                if args.soft_temperature and train.costs is not None
                else None
            ),
        )
        after = agreement(model, held)
        regret, off_list = teacher_regret(model, held)
        print(
            f"round {k}: held-out agreement {after:.3f}, teacher regret of the network's "
            f"action {regret:.4f} ({off_list:.1%} not compared by the teacher)",
            flush=True,
        )
        model.save(rdir / "model.zip")
        write_metadata(
            rdir,
            env,
            {
                **{
                    key: v
                    for key, v in meta.items()
                    if key
                    not in (
                        "env_id",
                        "env_namespace",
                        "env_version",
                        "scenario",
                        "env_config",
                        "spaces",
                        "deployment",
                        "sessions",
                        "best_validation",
                        "evaluations",
                    )
                },
                "command": prov.command,
                "date": prov.date,
                "version": prov.version,
                "git_revision": prov.git_revision,
                "run": f"{args.name}-round{k}",
                "distilled": {
                    "init": str(init),
                    "round": k,
                    "labels": len(data),
                    "teacher": settings["teacher"],
                },
                "in_progress": False,
                "interrupted": False,
            },
        )
        per: dict[str, float] = {}
        score = math.nan
        if args.val_traces:
            print(f"round {k}: validating the bare network ...", flush=True)
            per = bare_validation(rdir, args.val_scenarios, args.val_traces)
            score = mean_score(per)
        kept = not args.val_traces or score < best_score - args.tolerance
        if kept:
            best_path, best_score = rdir, score if args.val_traces else best_score
        rec = {
            "round": k,
            "policy": str(rdir),
            "labelling": stats_rec,
            "pooled_labels": len(data),
            "bc_accuracy": fit["bc_accuracy"],
            "held_out_agreement_before": before,
            "held_out_agreement": after,
            "held_out_regret": regret,
            "held_out_not_compared": off_list,
            "per_scenario": per,
            "score": score,
            "kept": kept,
        }
        records.append(rec)
        write_log()
        print(
            f"round {k}: validation {per} score {score:.4f} ({'kept' if kept else 'not kept'})",
            flush=True,
        )

    rows = []
    for r in sorted(records, key=lambda r: r["round"]):
        lab = r.get("labelling") or {}
        rows.append(
            {
                "round": r["round"],
                "policy": r["policy"],
                "beta": lab.get("beta"),
                "labels": lab.get("labels"),
                "pooled_labels": r.get("pooled_labels"),
                "label_is_crius": lab.get("label_is_crius"),
                "agree_with_driver": lab.get("agree_with_driver"),
                "ms_per_label": lab.get("ms_per_label"),
                "held_out_agreement": r.get("held_out_agreement"),
                "held_out_regret": r.get("held_out_regret"),
                **{f"jct_ratio_{s}": v for s, v in (r.get("per_scenario") or {}).items()},
                "score": r["score"],
                "kept": r["kept"],
            }
        )
    table = pd.DataFrame(rows)
    atomic_write_text(folder / "distill.csv", table.to_csv(index=False))
    best = _publish_best(folder, records)
    md = [
        f"# DAgger from the lookahead: {args.name}",
        "",
        prov.markdown(),
        "",
        "Round −1 is the initial network. Labels: "
        + (
            "the lookahead's best expressible action at every state with a choice "
            "(`crius_gym/rl/dagger.py`)"
            if args.teacher_kind == "lookahead"
            else "the cheapest of the driving network's top actions and waiting at every "
            "state with a choice, by rollouts in which that network decides the rest (its own "
            "lookahead, `crius_gym/rl/network_lookahead.py`: expert iteration)"
        )
        + (
            f"; {sum(len(d) for d in parts[: len(args.prior_labels)])} labels of earlier runs "
            f"pooled into every round ({', '.join(args.prior_labels)})"
            if args.prior_labels
            else ""
        )
        + "; score: mean over the validation scenarios of the bare network's mean JCT ratio "
        "to Crius.",
        "",
        table.to_markdown(index=False, floatfmt=".4g"),
        "",
        f"Best kept: round {best['round']} (`{best['policy']}`, score {best['score']:.4f}), "
        f"copied to `{folder / 'best_model.zip'}` (run it with `evaluate.py --policy "
        f"{folder} --guide-margin 0`).",
        "",
    ]
    atomic_write_text(folder / "distill.md", "\n".join(md))
    print(f"wrote {folder / 'distill.md'}", flush=True)


def _transfer_init(init: Path, meta: dict[str, Any], env: Any, folder: Path, prov: Any) -> Path:
    """The init's weights in a network for ``env``'s spaces (another count of rows or Cells).

    Written once to ``folder`` (a policy folder) and reused when the run resumes.

    Raises:
        SystemExit: naming the init when its weights do not fit the new network.
    """
    from sb3_contrib import MaskablePPO

    from crius_gym.env.cluster_env import CriusEnv
    from crius_gym.env.config import EnvConfig
    from crius_gym.rl.saved import load_policy, policy_file, write_metadata

    target = folder / "best_model.zip"
    if target.is_file():
        return policy_file(folder)
    old_env = CriusEnv(env.scenario, EnvConfig(**dict(meta["env_config"])))
    model, _ = load_policy(init, old_env)
    fresh = MaskablePPO(
        type(model.policy), env, policy_kwargs=model.policy_kwargs, device="cpu", seed=0
    )
    try:
        fresh.policy.load_state_dict(model.policy.state_dict(), strict=True)
    except RuntimeError as exc:
        raise SystemExit(f"--env-set: {init}'s weights do not fit the new spaces: {exc}") from None
    folder.mkdir(parents=True, exist_ok=True)
    fresh.save(target)
    keep = {
        k: v
        for k, v in meta.items()
        if k not in ("env_id", "env_namespace", "env_version", "scenario", "env_config", "spaces")
    }
    write_metadata(
        folder,
        env,
        {
            **keep,
            "transferred": {"from": str(init), "command": prov.command},
            "in_progress": False,
            "interrupted": False,
        },
    )
    return target


def _start_model(init: Path, env: Any, changes: list[str], seed: int) -> Any:
    """The network a round distils into: the init's, or one with changed options.

    With changed options the init's weights are kept where their shapes still fit and the
    options' added terms start at zero (it computes what the init does); where they do not
    fit (another width) the network starts fresh.
    """
    from sb3_contrib import MaskablePPO

    from crius_gym.rl.saved import load_policy

    model, _ = load_policy(init, env)
    if not changes:
        return model
    kwargs = {**model.policy_kwargs, **key_values(changes, "--policy-kwargs")}
    try:
        fresh = MaskablePPO(type(model.policy), env, policy_kwargs=kwargs, device="cpu", seed=seed)
    except TypeError as exc:
        raise SystemExit(f"--policy-kwargs: {exc}") from None
    old, new = model.policy.state_dict(), fresh.policy.state_dict()
    if any(k in new and new[k].shape != v.shape for k, v in old.items()):
        return fresh  # another width: nothing carries over (load_state_dict would copy some)
    fresh.policy.load_state_dict(old, strict=False)
    from crius_gym.rl.networks import RowScorer

    scorer = fresh.policy.mlp_extractor
    if isinstance(scorer, RowScorer):
        scorer.zero_added_terms()
    return fresh


def _publish_best(folder: Path, records: list[dict[str, Any]]) -> dict[str, Any]:
    """Copy the last kept round's network (or the initial one) to ``folder/best_model.zip``.

    Its ``metadata.yaml`` goes beside it, so the run folder is a policy folder like a training
    run's (``evaluate.py --policy <folder>``, labelled ``ppo:<folder name>``). The kept rounds
    improve on each other, so the last one kept is the best by validation. Files are replaced
    atomically; returns the round's record.
    """
    import shutil

    from crius_gym.atomic import atomic_path
    from crius_gym.rl.saved import policy_file

    kept = [r for r in records if r["kept"]]
    best = max(kept, key=lambda r: r["round"])
    source = policy_file(Path(best["policy"]))
    for name in (source.name, "metadata.yaml"):
        src = source.parent / name
        if src.is_file():
            dst = folder / ("best_model.zip" if name == source.name else name)
            with atomic_path(dst) as tmp:
                shutil.copyfile(src, tmp)
    return best


def cli() -> None:
    """Console entry point."""
    run_main(main)


if __name__ == "__main__":
    cli()
