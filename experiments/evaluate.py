"""Evaluate saved PPO policies against the rule-based schedulers on held-out traces.

The program is crius_gym/scripts/evaluate.py (also installed as a console script); this file
keeps ``python experiments/evaluate.py`` working from a checkout. See ``--help``.
"""

from crius_gym.scripts.evaluate import cli

if __name__ == "__main__":
    cli()
