"""Average the weights of distilled networks into one: a model soup (issue 34).

The program is crius_gym/scripts/soup.py; this file keeps ``python experiments/soup.py``
working from a checkout. See ``--help``.
"""

from crius_gym.scripts.soup import cli

if __name__ == "__main__":
    cli()
