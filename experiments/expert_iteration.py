"""Expert iteration: rounds of vine training, each labelled by the previous round's network.

The program is crius_gym/scripts/expert_iteration.py; this file keeps
``python experiments/expert_iteration.py`` working from a checkout. See ``--help``.
"""

from crius_gym.scripts.expert_iteration import cli

if __name__ == "__main__":
    cli()
