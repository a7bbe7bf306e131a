"""Schedulers: rule-based policies and the registry (see :mod:`crius_gym.sim.policy`)."""
