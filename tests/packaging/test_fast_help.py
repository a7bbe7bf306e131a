"""The programs answer --help without importing torch, SB3 or the simulator (issue 13)."""

import subprocess
import sys

import pytest

HEAVY = ("torch", "stable_baselines3", "crius_gym.sim.simulator", "matplotlib")


@pytest.mark.parametrize("program", ["train_ppo", "evaluate", "run_baselines"])
def test_help_imports_nothing_heavy(program):
    code = (
        "import sys\n"
        f"from crius_gym.scripts import {program} as m\n"
        "sys.argv = ['prog', '--help']\n"
        "try:\n    m.parse_args()\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY:' + ','.join(x for x in {HEAVY!r} if x in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "--help" in out.stdout or "usage:" in out.stdout
    assert out.stdout.splitlines()[-1] == "HEAVY:"
