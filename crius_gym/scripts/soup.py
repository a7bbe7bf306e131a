"""Average the weights of distilled networks into one (a model soup) and validate it.

The --policy networks must share one shape (they do when distilled from one start, e.g. the
rounds and seeds of experiments/distill_lookahead.py, which all start from the reference
policy). With --greedy (the default) each is first scored alone by its bare network (no guide
margin, no envelope) on the first --val-traces validation traces of every --val-scenarios
scenario (mean over scenarios of the mean JCT ratio to Crius, as distill_lookahead.py keeps its
rounds), then, from the best, each next-best is added to the average only if the average with
it scores lower by more than --tolerance (Wortsman et al., "Model soups", ICML 2022). With
--uniform, all are averaged and scored once.

Writes --out (a policy folder: best_model.zip, metadata.yaml with the members, the scores and this
command; run it with ``evaluate.py --policy <out> --guide-margin 0``) and --out/soup.md with the
scores and the git revision. Resumable: each score is saved in --out/soup.yaml as it is
measured, and a rerun of the same command reuses it.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from crius_gym.cli import NONNEG, NONNEG_INT, run_main
from crius_gym.provenance import Provenance
from crius_gym.scripts.distill_lookahead import VAL_SCENARIOS  # the same keep rule's sets

#: Keys of a member's metadata that describe its own training, not the soup.
_OWN_KEYS = ("distilled", "best_validation", "evaluations", "deployment", "sessions")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--policy",
        nargs="+",
        required=True,
        help="saved policies (folders or .zip files) of one network shape",
    )
    p.add_argument("--out", required=True, help="policy folder to write the soup to")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument(
        "--greedy",
        dest="greedy",
        action="store_true",
        default=True,
        help="greedy soup: add each policy, best first, only if it helps (default)",
    )
    mode.add_argument(
        "--uniform", dest="greedy", action="store_false", help="average all the policies"
    )
    p.add_argument(
        "--val-scenarios",
        nargs="+",
        default=VAL_SCENARIOS,
        help=f"validation scenarios of the score (default: {' '.join(VAL_SCENARIOS)})",
    )
    p.add_argument(
        "--val-traces",
        type=NONNEG_INT,
        default=4,
        help="validation traces per scenario (default: 4)",
    )
    p.add_argument(
        "--tolerance",
        type=NONNEG,
        default=0.0,
        help="a policy joins the greedy soup when the score falls by more than this (default: 0)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    # The RL stack is imported here: --help answers at once.
    import pandas as pd
    import yaml

    from crius_gym.atomic import atomic_write_text
    from crius_gym.env.cluster_env import CriusEnv
    from crius_gym.env.config import EnvConfig
    from crius_gym.rl.expert_iteration import bare_validation, mean_score
    from crius_gym.rl.saved import policy_file, read_metadata, write_metadata
    from crius_gym.rl.soup import SoupResult, average_weights, describe, greedy_soup
    from crius_gym.scenarios import load_scenario
    from crius_gym.yamlfile import load_yaml_file

    prov = Provenance.capture()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    members = [str(m) for m in args.policy]
    meta = read_metadata(policy_file(members[0]))
    # The members' training scenario, so the soup's metadata says what it was trained on.
    scenario = load_scenario(str(meta.get("scenario") or args.val_scenarios[0]))
    env = CriusEnv(scenario, EnvConfig(**dict(meta["env_config"])))
    cache_path = out / "soup.yaml"
    settings = {"val_scenarios": list(args.val_scenarios), "val_traces": args.val_traces}
    cache: dict[str, Any] = {}
    if cache_path.is_file():
        saved = load_yaml_file(cache_path) or {}
        if saved.get("settings") == settings:
            cache = dict(saved.get("scores") or {})

    def write(model: Any, folder: Path, soup: list[str], extra: dict[str, Any]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        # best_model.zip: the file a policy folder is run by (its label is the folder's name).
        model.save(folder / "best_model.zip")
        own = {k: v for k, v in meta.items() if k not in _OWN_KEYS}
        for key in ("env_id", "env_namespace", "env_version", "scenario", "env_config", "spaces"):
            own.pop(key, None)  # written by write_metadata from the env
        write_metadata(
            folder,
            env,
            {
                **own,
                "command": prov.command,
                "date": prov.date,
                "version": prov.version,
                "git_revision": prov.git_revision,
                "run": folder.name,
                "soup": {"members": soup, **extra},
                "in_progress": False,
                "interrupted": False,
            },
        )

    def score(soup: list[str]) -> float:
        key = " + ".join(soup)
        if key not in cache:
            trial = out / "trial"
            write(average_weights(soup, env), trial, soup, {})
            per = bare_validation(trial, args.val_scenarios, args.val_traces)
            cache[key] = {"per_scenario": per, "score": mean_score(per)}
            atomic_write_text(
                cache_path, yaml.safe_dump({"settings": settings, "scores": cache}, sort_keys=False)
            )
        print(f"  {key}: {cache[key]['score']:.4f} {cache[key]['per_scenario']}", flush=True)
        return float(cache[key]["score"])

    if args.greedy:
        result = greedy_soup(members, score, args.tolerance, log=print)
    else:
        result = SoupResult(members, score(members))
    record = describe(result)
    write(average_weights(result.members, env), out, result.members, record)
    rows = [
        {
            "policies": key,
            "members": key.count(" + ") + 1,
            **{f"jct_ratio_{s}": v for s, v in rec["per_scenario"].items()},
            "score": rec["score"],
            "chosen": key == " + ".join(result.members),
        }
        for key, rec in cache.items()
    ]
    md = [
        f"# Model soup: {out.name}",
        "",
        prov.markdown(),
        "",
        "Score: mean over the validation scenarios of the bare network's mean JCT ratio to Crius "
        f"({args.val_traces} validation traces each); lower is better. Chosen: "
        f"{' + '.join(result.members)} (score {result.score:.4f}), written to `{out}` (run it "
        f"with `evaluate.py --policy {out} --guide-margin 0`).",
        "",
        pd.DataFrame(rows).to_markdown(index=False, floatfmt=".4g"),
        "",
    ]
    atomic_write_text(out / "soup.md", "\n".join(md))
    print(f"wrote {out} ({len(result.members)} members, score {result.score:.4f})", flush=True)


def cli() -> None:
    run_main(main)


if __name__ == "__main__":
    cli()
