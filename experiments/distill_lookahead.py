"""Distil the lookahead scheduler into the network by DAgger rounds (issue 34).

The program is crius_gym/scripts/distill_lookahead.py; this file keeps
``python experiments/distill_lookahead.py`` working from a checkout. See ``--help``.
"""

from crius_gym.scripts.distill_lookahead import cli

if __name__ == "__main__":
    cli()
