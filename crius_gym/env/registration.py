"""Register every scenario in ``envs/`` as a Gymnasium id ``crius_gym/<Name>-v<ENV_VERSION>``.

``hetero-64`` → ``crius_gym/Hetero64-v3``, ``crius-sim-1280`` → ``crius_gym/CriusSim1280-v3``.
Importing :mod:`crius_gym.env` registers them; ``gym.make("crius_gym/Hetero64-v3")`` then works
(or ``gym.make("crius_gym.env:crius_gym/Hetero64-v3")`` without the import).
"""

from __future__ import annotations

import gymnasium as gym

from crius_gym.env.cluster_env import ENV_VERSION
from crius_gym.sim.scenario import list_scenarios

NAMESPACE = "crius_gym"


def env_id(scenario: str) -> str:
    """The Gymnasium id of a scenario name."""
    name = "".join(part.capitalize() for part in scenario.replace("_", "-").split("-"))
    return f"{NAMESPACE}/{name}-v{ENV_VERSION}"


def register_scenarios() -> list[str]:
    """Register (idempotently) every scenario file; returns the ids."""
    ids = []
    for scenario in list_scenarios():
        eid = env_id(scenario)
        if eid not in gym.registry:
            gym.register(
                id=eid,
                entry_point="crius_gym.env.cluster_env:CriusEnv",
                kwargs={"scenario": scenario},
                disable_env_checker=False,
            )
        ids.append(eid)
    return ids


def scenario_of(eid: str) -> str:
    """The scenario name behind a registered id."""
    spec = gym.spec(eid)
    return str(spec.kwargs["scenario"])
