"""Scenarios: what a cluster, its workload and its settings are, and how files describe them.

- :mod:`~crius_gym.scenarios.spec`: :class:`Scenario` and what it builds (tuner, ground truth,
  simulator, synthetic and own traces);
- :mod:`~crius_gym.scenarios.loader`: ``envs/<name>.yaml`` parsed and validated
  (:func:`load_scenario`);
- :mod:`~crius_gym.scenarios.trace_files`: any trace file read onto a scenario's cluster
  (:func:`read_trace`).

They sit above the simulator and below the env: assembling a run is not simulating it.
"""

from crius_gym.scenarios.loader import load_scenario, parse_scenario
from crius_gym.scenarios.spec import (
    GROUND_TRUTHS,
    PolicySpec,
    Scenario,
    SplitSpec,
    WorkloadSpec,
    requested_demand,
)

__all__ = [
    "GROUND_TRUTHS",
    "PolicySpec",
    "Scenario",
    "SplitSpec",
    "WorkloadSpec",
    "load_scenario",
    "parse_scenario",
    "requested_demand",
]
