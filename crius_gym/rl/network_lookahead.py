"""The lookahead with a trained network as its rollout policy, in the env's action space.

:class:`~crius_gym.policies.lookahead.LookaheadPolicy` rolls Crius forward on copies of the
simulator; with a saved agent as its base (``experiments/lookahead.py --base-policy``) every
decision of every rollout goes through a fresh env adopting a fork, which costs 0.4-0.9 s per
decision (docs/lookahead.md). :class:`NetworkLookaheadPolicy` is the cheap path: the network
proposes its ``top_k`` most likely valid actions (and waiting), each is valued by batched
rollouts in lockstep in which the network decides the rest
(:class:`~crius_gym.rl.network_rollouts.NetworkRollouts`, over the jobs already arrived, so no
decision reads the trace's future), truncated ``horizon_s`` after the decision and the rest
valued by the upgrade schedule, and the cheapest is taken. It is one step of policy improvement
over the network (rollout-based policy improvement, Bertsekas; expert iteration's teacher when
the network is the previous round's) and a scheduler in its own right behind the
:class:`~crius_gym.sim.policy.Policy` boundary, like
:class:`~crius_gym.rl.agent_policy.AgentPolicy`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sb3_contrib import MaskablePPO

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.rl.agent_policy import AgentPolicy
from crius_gym.rl.dagger import StateLabel
from crius_gym.rl.network_rollouts import TAILS, NetworkRollouts, TailKind
from crius_gym.scenarios import Scenario
from crius_gym.sim.actions import Action
from crius_gym.sim.snapshot import Snapshot


@dataclass(frozen=True)
class NetworkLookaheadOptions:
    """How the network lookahead chooses.

    Attributes:
        top_k: candidates: the network's ``top_k`` most likely valid actions (its own first).
        wait: waiting is also a candidate wherever it is valid.
        horizon_s: truncate each rollout this many simulated seconds after the decision
            (None: to the end of the jobs present).
        tail: how a truncated rollout values the rest (``upgrade``, ``list`` or ``speed``).
        margin: relative cost improvement another candidate needs to replace the network's
            own action (0: the cheapest is taken; ties keep the network's action).
        logit_gap: only actions within this many nats of the network's own action's logit are
            candidates, waiting included (None: no gap): where the network is sure, nothing
            is rolled out, which is most of the cost saved on a large cluster.
    """

    top_k: int = 4
    wait: bool = True
    horizon_s: float | None = 7200.0
    tail: TailKind = "upgrade"
    margin: float = 0.0
    logit_gap: float | None = None

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {self.top_k}")
        if self.horizon_s is not None and not self.horizon_s > 0:
            raise ValueError(f"horizon_s must be > 0 or None, got {self.horizon_s}")
        if self.tail not in TAILS:
            raise ValueError(f"tail must be one of {', '.join(TAILS)}, got {self.tail!r}")
        if not 0 <= self.margin < 1:
            raise ValueError(f"margin must be in [0, 1), got {self.margin}")
        if self.logit_gap is not None and not self.logit_gap >= 0:
            raise ValueError(f"logit_gap must be >= 0 or None, got {self.logit_gap}")


def network_candidates(
    logits: np.ndarray, mask: np.ndarray, options: NetworkLookaheadOptions
) -> list[int]:
    """The actions valued at a state: the network's top valid ones (its own first), waiting.

    Args:
        logits: the network's logits of the state's actions.
        mask: the valid actions (the env's last action is WAIT).
        options: ``top_k``, ``wait`` and ``logit_gap``.
    """
    valid = np.flatnonzero(mask)
    ranked = valid[np.argsort(-logits[valid], kind="stable")]
    out = [int(a) for a in ranked[: options.top_k]]
    wait = len(mask) - 1
    if options.wait and mask[wait] and wait not in out:
        out.append(wait)
    if options.logit_gap is not None:
        floor = logits[out[0]] - options.logit_gap
        out = [a for a in out if logits[a] >= floor]
    return out


def cheapest(actions: Sequence[int], costs: Sequence[float], margin: float = 0.0) -> int:
    """The index of the action taken: the cheapest, ties to the earlier one.

    The first action (the network's own) stays unless another is cheaper by more than
    ``margin`` of its cost.
    """
    best = min(range(len(actions)), key=lambda i: (costs[i], i))
    return best if costs[best] < costs[0] * (1.0 - margin) else 0


@dataclass
class NetworkLookaheadStats:
    """What the lookahead did.

    Attributes:
        choices: env decisions with more than one candidate.
        changed: of those, where it took another action than the network's own.
        candidates: candidates valued in all.
        seconds: wall time per :meth:`NetworkLookaheadPolicy.decide` call.
    """

    choices: int = 0
    changed: int = 0
    candidates: int = 0
    seconds: list[float] = field(default_factory=list)


class NetworkLookaheadPolicy(AgentPolicy):
    """A saved agent improved by one step of lookahead with itself as the rollout policy.

    Args:
        path: the saved policy (a ``.zip`` or a folder holding ``model.zip``).
        scenario: the scenario it runs on (its cluster must be the run's).
        options: candidates, horizon and tail (:class:`NetworkLookaheadOptions`).
        name: the label of its results (default: ``<policy folder>+look``).
    """

    def __init__(
        self,
        path: str | Path,
        scenario: Scenario,
        options: NetworkLookaheadOptions | None = None,
        *,
        name: str | None = None,
    ) -> None:
        super().__init__(path, scenario, deployment="bare", name=name)
        if name is None:
            self.name += "+look"
        self.options = options or NetworkLookaheadOptions()
        opts = self.options
        self.rollouts = NetworkRollouts(self.model, opts.horizon_s, tail=opts.tail)
        self.stats = NetworkLookaheadStats()

    def decide(self, snapshot: Snapshot) -> list[Action]:
        """The actions at this decision point, each chosen by rollouts (timed)."""
        t0 = time.perf_counter()
        out = list(super().decide(snapshot))
        self.stats.seconds.append(time.perf_counter() - t0)
        return out

    def _choose(self, env: CriusEnv, obs: dict[str, np.ndarray], mask: np.ndarray) -> int:
        actions = network_candidates(self.rollouts.logits([obs])[0], mask, self.options)
        if len(actions) == 1:
            return actions[0]
        costs = self.rollouts.costs(env, actions)
        self.stats.choices += 1
        self.stats.candidates += len(actions)
        best = cheapest(actions, costs, self.options.margin)
        self.stats.changed += int(best != 0)
        return actions[best]


class NetworkTeacher:
    """The network lookahead as DAgger's teacher: expert iteration's labels.

    Labels a training env's state with the cheapest of the network's candidates by its own
    truncated rollouts (:func:`network_candidates`, :func:`cheapest`), the rollouts holding
    only the jobs already arrived. With the previous round's network as ``model`` a DAgger
    round is a round of expert iteration (Anthony et al. 2017): the distilled policy labels the
    next round through its lookahead.

    Args:
        model: the rollout policy (and the proposer of the candidates).
        options: candidates, horizon, tail and margin.
    """

    def __init__(self, model: MaskablePPO, options: NetworkLookaheadOptions) -> None:
        self.options = options
        self.rollouts = NetworkRollouts(model, options.horizon_s, tail=options.tail)

    def __call__(self, env: CriusEnv, obs: dict[str, np.ndarray], mask: np.ndarray) -> StateLabel:
        """The label of ``env``'s current state; ``env`` is left as it was."""
        costs = np.full(len(mask), np.nan, dtype=np.float32)
        actions = network_candidates(self.rollouts.logits([obs])[0], mask, self.options)
        if len(actions) == 1:
            return StateLabel(actions[0], math.nan, costs, 0)
        values = self.rollouts.costs(env, actions)
        best = cheapest(actions, values, self.options.margin)
        costs[actions] = values
        chosen = values[best]
        others = [c - chosen for i, c in enumerate(values) if i != best and math.isfinite(c)]
        regret = sum(others) / len(others) / chosen if others and chosen > 0 else math.nan
        return StateLabel(actions[best], regret, costs, len(actions))


__all__ = [
    "NetworkLookaheadOptions",
    "NetworkLookaheadPolicy",
    "NetworkLookaheadStats",
    "NetworkTeacher",
    "cheapest",
    "network_candidates",
]
