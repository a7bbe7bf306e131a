"""Run rule-based schedulers on a scenario's cluster and workload; write tables and figures.

The program is crius_gym/scripts/run_baselines.py (also installed as a console script); this file
keeps ``python experiments/run_baselines.py`` working from a checkout. See ``--help``.
"""

from crius_gym.scripts.run_baselines import cli

if __name__ == "__main__":
    cli()
