"""Gymnasium environment over the simulator (the ids are registered by ``import crius_gym``)."""

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.registration import ENV_VERSION, env_id, register_scenarios

REGISTERED_IDS = register_scenarios()

__all__ = ["ENV_VERSION", "REGISTERED_IDS", "CriusEnv", "EnvConfig", "env_id"]
