"""Gymnasium ids of the scenarios: ``crius_gym/<Name>-v<ENV_VERSION>``, registered on import.

``hetero-64`` → ``crius_gym/Hetero64-v4``, ``crius-sim-1280`` → ``crius_gym/CriusSim1280-v4``.
``import crius_gym`` registers every scenario file (string entry points: nothing heavy is
imported until ``gym.make``), as minigrid, highway-env and ale-py do. Each spec carries
``max_episode_steps`` (the env's decision guard), so Gymnasium's ``TimeLimit`` applies, and the
``EpisodeMetrics`` wrapper after it: a ``gym.make(..., max_episode_steps=N)`` truncation ends
the episode with the run's metrics too.
"""

from __future__ import annotations

import warnings

import gymnasium as gym

from crius_gym.bundled import list_scenarios, scenario_dir

NAMESPACE = "crius_gym"
#: Bump on any change to observations, actions, reward or dynamics (the registered ids carry it).
ENV_VERSION = 4
#: Versions whose saved policies run unchanged in this one (same spaces, same dynamics).
COMPATIBLE_VERSIONS = (4,)
#: ``EnvConfig.max_decisions``' default, the episode guard the specs advertise.
MAX_EPISODE_STEPS = 20_000


# Applied after TimeLimit, so a truncation from outside still ends with the run's metrics.
_METRICS_WRAPPER = gym.envs.registration.WrapperSpec(
    name="EpisodeMetrics", entry_point="crius_gym.env.wrappers:EpisodeMetrics", kwargs={}
)


def env_id(scenario: str) -> str:
    """The Gymnasium id of a scenario name."""
    name = "".join(part.capitalize() for part in scenario.replace("_", "-").split("-"))
    return f"{NAMESPACE}/{name}-v{ENV_VERSION}"


def register_scenarios() -> list[str]:
    """Register (idempotently) every scenario file; returns the ids.

    Warns when no scenario file is found (a broken install, or ``$CRIUS_GYM_ENVS`` pointing at
    an empty folder), instead of registering nothing silently.
    """
    scenarios = list_scenarios()
    if not scenarios:
        warnings.warn(
            f"crius_gym: no scenario files in {scenario_dir()}; no environment ids registered",
            RuntimeWarning,
            stacklevel=2,
        )
    ids = []
    for scenario in scenarios:
        eid = env_id(scenario)
        if eid not in gym.registry:
            gym.register(
                id=eid,
                entry_point="crius_gym.env.cluster_env:CriusEnv",
                kwargs={"scenario": scenario},
                max_episode_steps=MAX_EPISODE_STEPS,
                disable_env_checker=False,
                additional_wrappers=(_METRICS_WRAPPER,),
            )
        ids.append(eid)
    return ids


def scenario_of(eid: str) -> str:
    """The scenario name behind a registered id."""
    spec = gym.spec(eid)
    return str(spec.kwargs["scenario"])
