"""Write (or check) the JSON Schemas editors use for the configuration files.

envs/scenario.schema.json (scenario files) and agents/ppo.schema.json (PPO hyperparameters) are
generated from the config dataclasses (crius_gym/schema.py) and committed; every YAML file in
those folders names its schema on its first line, so an editor with the YAML language server
validates and completes it. Needs the dev extra (pydantic).

    python experiments/write_schemas.py            # rewrite both
    python experiments/write_schemas.py --check    # exit 1 if a committed schema is stale
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from crius_gym.atomic import atomic_path
from crius_gym.cli import run_main

REPO = Path(__file__).resolve().parents[1]


def schemas() -> dict[Path, dict[str, object]]:
    """Each schema file and its content."""
    from crius_gym.rl.schema import hyperparameter_file_schema
    from crius_gym.scenarios.schema import scenario_file_schema

    return {
        REPO / "envs" / "scenario.schema.json": scenario_file_schema(),
        REPO / "agents" / "ppo.schema.json": hyperparameter_file_schema(),
    }


def render(schema: dict[str, object]) -> str:
    """The file's text: stable key order, two-space indent, final newline."""
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--check",
        action="store_true",
        help="compare the committed schemas with freshly generated ones; exit 1 when one differs",
    )
    args = p.parse_args()
    stale = []
    for path, schema in schemas().items():
        text = render(schema)
        if args.check:
            if not path.is_file() or path.read_text(encoding="utf-8") != text:
                stale.append(path)
            continue
        with atomic_path(path) as tmp:
            Path(tmp).write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(REPO)}")
    if stale:
        names = ", ".join(str(p.relative_to(REPO)) for p in stale)
        print(f"stale: {names}; run python experiments/write_schemas.py", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    run_main(main)
