"""Run schedulers on a Ray cluster (the runtime) instead of the simulator.

The program is crius_gym/scripts/run_cluster.py (also installed as a console script); this file
keeps ``python experiments/run_cluster.py`` working from a checkout. See ``--help``.
"""

from crius_gym.scripts.run_cluster import cli

if __name__ == "__main__":
    cli()
