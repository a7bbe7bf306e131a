"""The command-line programs: ``experiments/*.py`` and the console scripts run the same code.

``crius-train`` = ``python experiments/train_ppo.py``, ``crius-evaluate`` =
``python experiments/evaluate.py``, ``crius-baselines`` = ``python experiments/run_baselines.py``
(declared in ``pyproject.toml``'s ``[project.scripts]``, so an installed wheel has them).
"""
