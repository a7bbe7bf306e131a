"""The scenario ids (kept for imports of this path; see :mod:`crius_gym.registration`)."""

from crius_gym.registration import NAMESPACE, env_id, register_scenarios, scenario_of

__all__ = ["NAMESPACE", "env_id", "register_scenarios", "scenario_of"]
