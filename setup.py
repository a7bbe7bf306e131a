"""Build hook: the wheel carries a copy of the top-level envs/ and agents/ folders.

The repository keeps one copy of each scenario file and hyperparameter file, where users look
for them (envs/, agents/). A wheel is installed away from the repository, so the build copies
them into the package as crius_gym/_bundled/ (read by crius_gym/bundled.py). Everything else is
configured in pyproject.toml.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent


class BuildWithBundledFolders(build_py):
    """build_py, then envs/ and agents/ (YAML files and their JSON Schemas) into _bundled/."""

    def run(self) -> None:
        super().run()
        for folder in ("envs", "agents"):
            target = Path(self.build_lib) / "crius_gym" / "_bundled" / folder
            target.mkdir(parents=True, exist_ok=True)
            for pattern in ("*.yaml", "*.schema.json"):
                for f in sorted((ROOT / folder).glob(pattern)):
                    shutil.copy2(f, target / f.name)


setup(cmdclass={"build_py": BuildWithBundledFolders})
