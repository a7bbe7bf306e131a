"""``experiments/lookahead.py`` with a saved network as its rollout policy, on ``tiny``."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pandas as pd

from tests.conftest import REPO


def _script():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "lookahead_script", REPO / "experiments" / "lookahead.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_a_saved_network_as_rollout_policy(tmp_path: Path) -> None:
    ref = REPO / "results" / "reference_policy"
    argv = ["--scenario", "tiny", "--traces", "own", "--max-jobs", "6", "--out", str(tmp_path)]
    assert _script().main([*argv, "--base-policy", str(ref)]) == 0
    table = pd.read_csv(tmp_path / "lookahead.csv")
    assert len(table) == 1 and table["finished"].iloc[0] == 6
    assert table["rollouts_per_decision"].iloc[0] > 0
    assert f"base={ref}" in table["options"].iloc[0]
    assert "Rollout policy: the saved agent" in (tmp_path / "lookahead.md").read_text()
