"""Gymnasium environment over the simulator; importing it registers the scenario ids."""

from crius_gym.env.cluster_env import ENV_VERSION, CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.env.registration import env_id, register_scenarios

REGISTERED_IDS = register_scenarios()

__all__ = ["ENV_VERSION", "REGISTERED_IDS", "CriusEnv", "EnvConfig", "env_id"]
