"""Drive the environment with a trained model or with a rule-based policy."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import gymnasium as gym
import numpy as np
import torch
from sb3_contrib import MaskablePPO

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.rl.envelope import Envelope
from crius_gym.sim.actions import Action
from crius_gym.sim.policy import Policy, PolicyContext
from crius_gym.sim.simulator import RunResult
from crius_gym.workload.job import Trace


class GreedyActor:
    """The most likely valid action of a trained policy, without SB3's per-step machinery.

    ``model.predict`` converts and preprocesses the observation, builds a masked categorical
    distribution and takes its mode; the masked argmax of the logits is the same action (SB3
    masks by setting invalid logits to a large negative number). This calls the network's actor
    directly under ``torch.inference_mode``: several times faster per step, which is most of
    an evaluation's time on a long trace.

    With ``guide_margin`` δ > 0 the actor departs from its guide's proposal only where it
    prefers its own action by at least δ in logits, i.e. where it is at least e^δ times as likely
    as the guide's: a conservative deployment of a policy learned on top of a baseline (in the
    spirit of safe policy improvement with baseline bootstrapping, Laroche et al., ICML 2019,
    which keeps the baseline's action where the learned one is uncertain). δ = 0 is the plain
    argmax; δ = inf is the guide itself. :mod:`crius_gym.rl.deviation` selects δ on
    validation traces.

    With an ``envelope`` the actor also keeps to the states it was trained in: when more jobs
    wait, or run, than it ever saw on its training episodes, the guide decides (a policy is not
    trusted outside its training distribution; defaulting to the heuristic there is the
    online-safety-assurance rule of Rotman, Schapira & Tamar, HotNets 2020, arXiv 2010.03625;
    :mod:`crius_gym.rl.envelope`).

    Args:
        model: a trained MaskablePPO (any policy network).
        guide_margin: δ in logits (nats); 0 disables the gate.
        envelope: the states it was trained in (None: no envelope).
    """

    def __init__(
        self, model: MaskablePPO, guide_margin: float = 0.0, envelope: Envelope | None = None
    ) -> None:
        if not guide_margin >= 0:
            raise ValueError(f"guide_margin must be >= 0, got {guide_margin}")
        self.policy = model.policy
        self.guide_margin = guide_margin
        self.envelope = envelope
        space = self.policy.observation_space
        assert isinstance(space, gym.spaces.Dict)
        # Every key of the model's space, as it expects it: a plain MultiInputPolicy reads the
        # action mask as an input too.
        self.keys = list(space.spaces)

    def logits(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """The actor's logits for one observation (before masking)."""
        p = self.policy
        with torch.inference_mode():
            tensors = {k: torch.from_numpy(obs[k]).unsqueeze(0) for k in self.keys}
            features = p.extract_features(tensors, p.pi_features_extractor)
            assert isinstance(features, torch.Tensor)
            out: np.ndarray = p.action_net(p.mlp_extractor.forward_actor(features))[0].numpy()
        return out

    def __call__(
        self,
        obs: dict[str, np.ndarray],
        mask: np.ndarray,
        guide: int | None = None,
        waiting: int = 0,
        running: int = 0,
    ) -> int:
        """The action for one observation and its mask.

        Args:
            obs: the observation.
            mask: its valid actions.
            guide: the guide's proposal (None: no gate, no envelope).
            waiting: jobs waiting now (the env's ``info["waiting"]``), for the envelope.
            running: jobs running now (``info["running"]``), for the envelope.
        """
        if guide is not None and (
            self.guide_margin == math.inf
            or (self.envelope is not None and not self.envelope.holds(waiting, running))
        ):
            return guide
        logits = np.where(mask, self.logits(obs), -np.inf)
        action = int(np.argmax(logits))
        if guide is not None and logits[action] - logits[guide] < self.guide_margin:
            return guide  # not preferred by the margin (or the guide's own action)
        return action


def run_model(
    model: MaskablePPO,
    env: CriusEnv,
    trace: Trace,
    deterministic: bool = True,
    seed: int = 0,
    guide_margin: float = 0.0,
    envelope: Envelope | None = None,
) -> tuple[RunResult, int]:
    """Run a trained policy on a whole trace through the env, always with the action mask.

    Deterministic runs take the masked argmax of the logits (:class:`GreedyActor`, the same
    action as ``model.predict(deterministic=True)``, with its ``guide_margin`` gate and its
    ``envelope`` when the env has a guide); stochastic ones sample through SB3
    (neither).

    Returns:
        (the run's result, invalid actions the model produced — 0 for a correct policy).
    """
    obs, info = env.reset(seed=seed, options={"trace": trace})
    gated = bool(guide_margin) or envelope is not None
    if gated and not deterministic:
        raise ValueError("guide_margin and envelope gate the deterministic actor only")
    greedy = GreedyActor(model, guide_margin, envelope) if deterministic else None
    while True:
        mask = env.action_masks()
        if greedy is not None:
            guide = env.guide_action() if gated else None
            action = greedy(obs, mask, guide, int(info["waiting"]), int(info["running"]))
        else:
            action = int(model.predict(obs, action_masks=mask, deterministic=False)[0])
        obs, _, term, trunc, info = env.step(action)
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
