"""A saved agent behind the policy boundary: it decides on any run's :class:`Snapshot`.

An agent acts through the env, one action per step, and the env owns its simulator. Anything
that drives policies through ``decide(snapshot)`` (the simulator's own ``run``, the Ray runtime
of :mod:`crius_gym.runtime`) can run it through :class:`AgentPolicy`: at each decision point
the env adopts a copy of the present (``snapshot.fork(estimated=False)``: the jobs arrived so
far, priced as the run prices them, no future arrivals) and the agent steps it until it chooses
WAIT or time would move; the actions it took there are the decision.

Differences from an episode of the env (``evaluate.py``), which sees the same states but keeps
one simulator: the copy has no pending arrivals, so WAIT is not offered while the cluster is
idle with nothing running (the agent must act; an episode would let it wait for the next job),
and a policy trained without ``scale_free`` observations sees zero jobs to come. Scale-free
policies (the reference policy's settings) see the same observation otherwise.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.rl.agent import GreedyActor
from crius_gym.rl.deviation import recorded_deployment
from crius_gym.rl.saved import load_policy, model_metadata, policy_file
from crius_gym.scenarios import Scenario
from crius_gym.sim.actions import Action
from crius_gym.sim.policy import PolicyContext
from crius_gym.sim.snapshot import Snapshot

if TYPE_CHECKING:
    from crius_gym.rl.envelope import Envelope


class AgentPolicy:
    """A saved MaskablePPO agent as a :class:`~crius_gym.sim.policy.Policy` (module docstring).

    Args:
        path: the saved policy (a ``.zip`` or a folder holding ``model.zip``).
        scenario: the scenario it runs on (its cluster must be the run's).
        deployment: ``"bare"`` (default): the network's masked argmax, no guide margin, no
            envelope (the headline of every table); ``"recorded"``: the guide margin and
            envelope recorded in the policy's metadata.
        name: the label of its results (default: the policy folder's name).
        gym_id: the env id for a plain SB3 zip without ``metadata.yaml``.
    """

    tick_interval_s: float | None = None

    def __init__(
        self,
        path: str | Path,
        scenario: Scenario,
        *,
        deployment: str = "bare",
        name: str | None = None,
        gym_id: str | None = None,
    ) -> None:
        if deployment not in ("bare", "recorded"):
            raise ValueError(f"deployment must be 'bare' or 'recorded', not {deployment!r}")
        model_path = policy_file(path)
        meta = model_metadata(model_path, gym_id)
        cfg = EnvConfig(**{**meta["env_config"], "max_decisions": 10**12})
        self._env = CriusEnv(scenario, cfg)
        model, _ = load_policy(model_path, self._env, gym_id)
        self.model = model
        margin, envelope = 0.0, None
        if deployment == "recorded":
            margin, envelope = recorded_deployment(model_path, meta)
        self._gated = bool(margin) or envelope is not None
        self._actor = GreedyActor(model, margin, envelope)
        self.envelope: Envelope | None = envelope
        given = Path(path)
        label = given.name if given.is_dir() else given.stem  # a policy folder's own name
        self.name = name or label + ("" if deployment == "bare" else "@recorded")
        self.steps = 0

    def __deepcopy__(self, memo: dict[int, Any]) -> AgentPolicy:
        """A copy for a lookahead's rollouts.

        The network, catalogues and encoders are shared (read-only); the guide's policy state
        is the copy's own.
        """
        env = self._env
        other = copy.copy(self)
        other._env = copy.copy(env)
        if env.guide is not None:
            guide = copy.copy(env.guide)
            guide.policy = copy.deepcopy(env.guide.policy, memo)
            guide._ids = dict(env.guide._ids)
            other._env.guide = guide
        other._env._changes = env._changes.copy()
        return other

    def reset(self, ctx: PolicyContext) -> None:
        """Start a run: the guide's policy state starts afresh, as at an episode's reset."""
        env = self._env
        if ctx.cluster != env.sim.cluster:
            from crius_gym.errors import ConfigError

            raise ConfigError(f"{self.name}: the run's cluster is not {env.scenario.name}'s")
        if env.guide is not None:
            env.guide.reset(ctx.cluster, env.tuner, None)
        self.steps = 0

    def decide(self, snapshot: Snapshot) -> Sequence[Action]:
        """The agent's actions at this decision point (WAIT ends them)."""
        env = self._env
        env.adopt(snapshot.fork(estimated=False))
        now_s = env.sim.now_s
        actions: list[Action] = []
        obs = env.current_observation()
        while True:
            mask = env.action_masks()
            if not mask.any():
                return actions
            a = self._choose(env, obs, mask)
            self.steps += 1
            action = env._decode(a)
            if action is None:  # WAIT
                return actions
            actions.append(action)
            obs, _, term, trunc, _ = env.step(a)
            if term or trunc or env.sim.now_s != now_s:
                return actions  # nothing more to do at this instant

    def _choose(self, env: CriusEnv, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        """The env action the agent takes in ``env``'s present state."""
        sim = env.sim
        guide = env.guide_action() if self._gated else None
        return self._actor(obs, mask, guide, len(sim.waiting_indices), len(sim.active_indices))
