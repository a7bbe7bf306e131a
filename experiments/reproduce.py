"""Regenerate the committed results: run the stale stages of experiments/pipeline.yaml.

The program is crius_gym/scripts/reproduce.py (also installed as ``crius-reproduce``); this file
keeps ``python experiments/reproduce.py`` working from a checkout. See ``--help``.
"""

from crius_gym.scripts.reproduce import cli

if __name__ == "__main__":
    cli()
