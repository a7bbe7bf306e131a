"""Train a MaskablePPO scheduler (default: on the mixture envs/mix.yaml, < 20 min on 2 CPU cores).

The program is crius_gym/scripts/train_ppo.py (also installed as a console script); this file
keeps ``python experiments/train_ppo.py`` working from a checkout. See ``--help``.
"""

from crius_gym.scripts.train_ppo import cli

if __name__ == "__main__":
    cli()
