"""The README's two commands exist as Makefile targets, and CI runs exactly the test one."""

from __future__ import annotations

import re

from tests.conftest import REPO


def _quick_start() -> list[str]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text.split("## Set-up and the two commands", 1)[1].split("\n## ", 1)[0]
    block = section.split("```bash", 1)[1].split("```", 1)[0]
    return [line.split("#", 1)[0].strip() for line in block.strip().splitlines()]


def test_readme_commands_are_make_targets_that_set_themselves_up():
    assert _quick_start() == ["make train", "make test"]
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for target in ("train", "test"):
        assert re.search(rf"^{target}: \$\(STAMP\)$", makefile, re.M), target
    assert "experiments/train_ppo.py" in makefile and "-m pytest" in makefile
    assert 'pip install --quiet "$(TORCH)"' in makefile and "TORCH ?= torch==2.13.0" in makefile
    # torch's pinned CPU build goes in before the package, whose dependencies would pull CUDA.
    assert makefile.index('"$(TORCH)"') < makefile.index('-e ".[$(EXTRAS)]"')


def test_ci_runs_the_readme_test_command():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    commands = [
        line.strip()
        for line in ci.splitlines()
        if line.strip() and not line.lstrip().startswith(("#", "set ", "cd ", "export "))
    ]
    assert commands == [_quick_start()[1]]
