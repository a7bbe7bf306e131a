"""The DAgger teacher as a policy: the ceiling of distillation in the env's action space.

The program is crius_gym/scripts/teacher_ceiling.py; this file keeps
``python experiments/teacher_ceiling.py`` working from a checkout. See ``--help``.
"""

from crius_gym.scripts.teacher_ceiling import cli

if __name__ == "__main__":
    cli()
