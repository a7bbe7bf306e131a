"""Wrappers for the registered envs and for libraries with other conventions."""

from __future__ import annotations

from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium.utils import RecordConstructorArgs

METRIC_KEY = "avg_jct_s"  # present in the last info of every episode


class EpisodeMetrics(gym.Wrapper[Any, Any, Any, Any], RecordConstructorArgs):
    """Puts the run's metrics in the last ``info`` when an outer wrapper ends the episode.

    The env adds them when it terminates or truncates itself; Gymnasium's ``TimeLimit``
    (``max_episode_steps``) truncates from outside, so without this wrapper that last ``info``
    would lack them (and ``Monitor(info_keywords=...)`` would fail). Registered specs apply it
    after ``TimeLimit``.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        RecordConstructorArgs.__init__(self)
        gym.Wrapper.__init__(self, env)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        """Step, and fill in the metrics at an episode end that lacks them."""
        obs, reward, terminated, truncated, info = self.env.step(action)
        if (terminated or truncated) and METRIC_KEY not in info:
            info = {**info, **self.env.unwrapped.episode_metrics()}  # type: ignore[attr-defined]
        return obs, reward, terminated, truncated, info


class DictMaskObservation(gym.ObservationWrapper[Any, Any, Any], RecordConstructorArgs):
    """Observations as ``{"observations": <the env's tables>, "action_mask": mask}``.

    For libraries whose action masking expects that layout (RLlib's action-masking models);
    the env's own ``action_mask`` table moves out of the observations.
    """

    def __init__(self, env: gym.Env[Any, Any]) -> None:
        RecordConstructorArgs.__init__(self)
        gym.ObservationWrapper.__init__(self, env)
        inner = env.observation_space
        assert isinstance(inner, gym.spaces.Dict) and "action_mask" in inner.spaces
        tables = {k: v for k, v in inner.spaces.items() if k != "action_mask"}
        self.observation_space = gym.spaces.Dict(
            {"observations": gym.spaces.Dict(tables), "action_mask": inner["action_mask"]}
        )

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, Any]:
        """Split the mask from the tables."""
        tables = {k: v for k, v in observation.items() if k != "action_mask"}
        return {"observations": tables, "action_mask": observation["action_mask"]}
