"""The results pipeline: every committed file under ``results/`` is the output of one stage.

Stages are declared in ``experiments/pipeline.yaml`` (:mod:`crius_gym.pipeline.declaration`),
their inputs hashed into a committed lock file (:mod:`crius_gym.pipeline.lock`) by the
workflow tool `doit <https://pydoit.org>`_, which orders and runs them
(:mod:`crius_gym.pipeline.engine`); ``python experiments/reproduce.py`` is the command.
See ``docs/pipeline.md``.
"""
