"""Export a trained policy as a small, self-contained folder (e.g. results/reference_policy/).

Copies a run's selected model (best_model.zip, else model.zip) with its optimizer state dropped
(a fresh Adam; the network is unchanged, which keeps the file a few hundred KB) and its
metadata.yaml, config.yaml and evaluations.csv, so that

    python experiments/evaluate.py --policy OUT ...

works on a fresh clone without training. The metadata records where the export came from.
"""

from __future__ import annotations

import argparse
import shutil
from collections.abc import Sequence
from pathlib import Path

import yaml
from sb3_contrib import MaskablePPO

from crius_gym.atomic import atomic_path, atomic_write_text
from crius_gym.cli import run_main
from crius_gym.errors import InputFileError
from crius_gym.provenance import Provenance
from crius_gym.rl.saved import METADATA_FILE
from crius_gym.yamlfile import load_yaml_file


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("run", metavar="RUN_DIR", help="a results/policies/<run> folder")
    p.add_argument(
        "--out",
        default="results/reference_policy",
        metavar="DIR",
        help="destination folder (default: results/reference_policy)",
    )
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    run = Path(args.run)
    model_path = run / "best_model.zip"
    if not model_path.is_file():
        model_path = run / "model.zip"
    meta_path = run / METADATA_FILE
    if not model_path.is_file() or not meta_path.is_file():
        raise InputFileError(run, f"needs best_model.zip (or model.zip) and {METADATA_FILE}")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = MaskablePPO.load(model_path, device="cpu")
    # A fresh optimizer: its moment estimates are twice the network's size and only matter to
    # continue the same run (fine-tuning from the export starts a new optimizer anyway).
    model.policy.optimizer = model.policy.optimizer_class(  # type: ignore[call-arg]
        model.policy.parameters(), lr=model.lr_schedule(1), **model.policy.optimizer_kwargs
    )
    # The training envs' last observations (one per env) are no part of a policy either.
    with atomic_path(out / "best_model.zip") as tmp:
        model.save(tmp, exclude=["_last_obs"])
    meta = load_yaml_file(meta_path) or {}
    meta["exported"] = {
        **Provenance.capture().as_dict(),
        "from": str(model_path),
        "note": "optimizer state dropped; the network is the run's selected model",
    }
    atomic_write_text(out / METADATA_FILE, yaml.safe_dump(meta, sort_keys=False))
    for name in ("config.yaml", "evaluations.csv", "best.yaml"):
        if (run / name).is_file():
            shutil.copyfile(run / name, out / name)
    size = (out / "best_model.zip").stat().st_size
    print(f"exported {model_path} to {out} ({size / 1024:.0f} KB)")


if __name__ == "__main__":
    run_main(main)
