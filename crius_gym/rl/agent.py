"""Drive the environment with a trained model or with a rule-based policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sb3_contrib import MaskablePPO

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.sim.actions import Action
from crius_gym.sim.policy import Policy, PolicyContext
from crius_gym.sim.simulator import RunResult
from crius_gym.workload.job import Trace


def run_model(
    model: MaskablePPO, env: CriusEnv, trace: Trace, deterministic: bool = True, seed: int = 0
) -> tuple[RunResult, int]:
    """Run a trained policy on a whole trace through the env, always with the action mask.

    Returns:
        (the run's result, invalid actions the model produced — 0 for a correct policy).
    """
    obs, _ = env.reset(seed=seed, options={"trace": trace})
    while True:
        action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=deterministic)
        obs, _, term, trunc, info = env.step(int(action))
        if term or trunc:
            result = env.episode_result()
            assert result is not None
            return result, int(info["invalid_actions"])


@dataclass
class DriverStats:
    """How a rule-based policy's decisions mapped onto the env's actions.

    Attributes:
        expressed: actions taken as env actions.
        external: actions the action space could not express (applied beside it).
        waits: WAIT steps (end of a decision point).
    """

    expressed: int = 0
    external: int = 0
    waits: int = 0


class HeuristicDriver:
    """Runs a rule-based policy through the env, exactly as the simulator would run it.

    At every simulator decision point (the env must have ``stop_at_every_event``) the policy
    decides once; each of its actions becomes an env action when the action space can express
    it, and is otherwise applied beside the action space (:meth:`CriusEnv.apply_external`);
    WAIT then ends the decision point. ``observe`` (if given) is called after every env step
    with (observation before it, mask, env action, reward) — the labelled examples of
    imitation learning.
    """

    def __init__(self, policy: Policy, seed: int = 0) -> None:
        self.policy = policy
        self.seed = seed

    def run(
        self,
        env: CriusEnv,
        trace: Trace | None = None,
        observe: Callable[[dict[str, np.ndarray], np.ndarray, int, float], None] | None = None,
        reset_seed: int | None = None,
    ) -> tuple[RunResult, DriverStats]:
        """One episode (``trace`` or a training episode drawn by the env)."""
        if not env.config.stop_at_every_event:
            raise ValueError("HeuristicDriver needs an env with stop_at_every_event=True")
        options = {"trace": trace} if trace is not None else None
        obs, _ = env.reset(seed=reset_seed, options=options)
        self.policy.reset(
            PolicyContext(env.sim.cluster, env.tuner, np.random.default_rng(self.seed))
        )
        stats = DriverStats()
        wait = env.config.num_actions - 1
        seen_point = -1
        queue: list[Action] = []
        while True:
            if env.decision_points != seen_point:
                seen_point = env.decision_points
                queue = list(self.policy.decide(env.sim.snapshot()))
            index = wait
            while queue:
                action = queue.pop(0)
                expressed = env.action_index(action)
                if expressed is not None:
                    stats.expressed += 1
                    index = expressed
                    break
                env.apply_external([action])
                stats.external += 1
                obs = env.current_observation()
            if index == wait:
                stats.waits += 1
            mask = env.action_masks()
            before = obs
            obs, reward, term, trunc, _ = env.step(index)
            if observe is not None:
                observe(before, mask, index, float(reward))
            if term or trunc:
                result = env.episode_result()
                assert result is not None
                return result, stats
