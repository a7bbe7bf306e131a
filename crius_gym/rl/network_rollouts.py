"""Rollouts with a network policy taking over: the rollout policy of expert iteration.

A vine label is the cheapest of a decision's actions when a rollout policy decides everything
after it. With Crius as the rollout policy that is one step of policy improvement over Crius;
with the distilled network itself it is the next step (expert iteration, Anthony et al. 2017;
approximate policy iteration, Bertsekas). :class:`NetworkRollouts` values the actions of one
decision with a saved policy as the rollout policy, on copies of the episode holding only the
jobs already arrived (:meth:`CriusEnv.branch`), so the label is a function of the state.

The branches of one decision are stepped **in lockstep**: at each step the observations of every
branch still running go through the network as one batch (the masked argmax of the logits, the
action :class:`~crius_gym.rl.agent.GreedyActor` takes), so k actions cost one forward pass per
step, not k. A rollout may be **truncated** ``horizon_s`` simulated seconds after the decision
(the same time for every branch, so their costs compare like for like); the rest is valued by
one of the lookahead's tails (:mod:`crius_gym.policies.rollout_tails`): ``list`` (the jobs still
waiting start in queue order as the running jobs free GPUs, nobody moves), ``upgrade`` (the list
schedule plus Crius's upgrades of running jobs onto idle GPUs) or ``speed`` (the rest at current
speeds, no queueing). With a horizon that covers the episode the cost is the full rollout's
(tested).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch
from sb3_contrib import MaskablePPO

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.policies.lookahead import rollout_cost_s
from crius_gym.policies.rollout_tails import (
    Tail,
    TailCells,
    list_schedule_tail,
    remaining_tail,
    upgrade_schedule_tail,
)
from crius_gym.sim.simulator import Simulator

TailKind = Literal["list", "upgrade", "speed"]
TAILS: tuple[TailKind, ...] = ("list", "upgrade", "speed")


@dataclass
class RolloutStats:
    """What the rollouts cost.

    Attributes:
        decisions: decisions valued.
        branches: branches rolled out.
        steps: env steps taken in all branches.
        forward_passes: batched network passes.
        truncated: branches stopped at the horizon.
    """

    decisions: int = 0
    branches: int = 0
    steps: int = 0
    forward_passes: int = 0
    truncated: int = 0


class NetworkRollouts:
    """Values a decision's actions by rollouts in which a trained policy decides the rest.

    Args:
        model: the rollout policy (any MaskablePPO of the env's observation space).
        horizon_s: truncate each rollout this many simulated seconds after the decision
            (None: to the end of the jobs present).
        tail_cells: Cells per waiting job the truncated rollouts' list schedule tries.
        tail: how a truncated rollout values the rest (``upgrade``, ``list`` or ``speed``).
            ``upgrade`` by default: of the three, its truncated labels agree with the full
            rollouts' most often (``experiments/truncation.py``, results/truncation).
    """

    def __init__(
        self,
        model: MaskablePPO,
        horizon_s: float | None = None,
        tail_cells: int = 3,
        tail: TailKind = "upgrade",
    ) -> None:
        if horizon_s is not None and not horizon_s > 0:
            raise ValueError(f"horizon_s must be > 0, got {horizon_s}")
        if tail not in TAILS:
            raise ValueError(f"tail must be one of {', '.join(TAILS)}, got {tail!r}")
        self.policy = model.policy
        self.horizon_s = horizon_s
        self.tail_cells = tail_cells
        self.tail: TailKind = tail
        self._cells: tuple[Any, TailCells] | None = None  # (cluster, its Cells)
        self.stats = RolloutStats()
        space: Any = self.policy.observation_space
        self.keys = [k for k in space.spaces if k != "action_mask"]

    def logits(self, observations: Sequence[dict[str, np.ndarray]]) -> np.ndarray:
        """The actor's logits for a batch of observations (rows in order)."""
        p = self.policy
        with torch.inference_mode():
            batch = {k: torch.from_numpy(np.stack([o[k] for o in observations])) for k in self.keys}
            features = p.extract_features(batch, p.pi_features_extractor)
            assert isinstance(features, torch.Tensor)
            out: np.ndarray = p.action_net(p.mlp_extractor.forward_actor(features)).numpy()
        self.stats.forward_passes += 1
        return out

    def costs(self, env: CriusEnv, actions: Sequence[int]) -> list[float]:
        """Σ time in the system of the jobs present (job-seconds) after each action, in order.

        ``env`` is left as it was; each action is taken on its own branch of it, then the
        policy decides every later step of that branch.
        """
        self.stats.decisions += 1
        start_s = env.sim.now_s
        branches: list[list[Any]] = []  # [env, observation, done]
        for action in actions:
            branch = env.branch(future=False)
            obs, _, term, trunc, _ = branch.step(int(action))
            branches.append([branch, obs, bool(term or trunc)])
        self.stats.branches += len(branches)
        horizon = self.horizon_s
        while True:
            live = [
                b
                for b in branches
                if not b[2] and (horizon is None or b[0].sim.now_s - start_s < horizon)
            ]
            if not live:
                break
            logits = self.logits([b[1] for b in live])
            for b, row in zip(live, logits, strict=True):
                mask = b[0].action_masks()
                action = int(np.argmax(np.where(mask, row, -np.inf)))
                obs, _, term, trunc, _ = b[0].step(action)
                b[1], b[2] = obs, bool(term or trunc)
                self.stats.steps += 1
        out = []
        for branch, _, done in branches:
            sim = branch.sim
            present = range(len(sim.records))
            if done:
                out.append(rollout_cost_s(sim, present))
            else:
                self.stats.truncated += 1
                out.append(rollout_cost_s(sim, present, self._tail(sim)))
        return out

    def _tail(self, sim: Simulator) -> Tail:
        """The rest of a truncated branch, valued by this rollout's tail."""
        if self.tail == "speed":
            return remaining_tail(sim)
        if self.tail == "upgrade":
            # The tuner's Cells are fixed for a cluster: cache them per cluster.
            if self._cells is None or not (
                self._cells[0] is sim.cluster or self._cells[0] == sim.cluster
            ):
                self._cells = (sim.cluster, TailCells(sim.snapshot()))
            return upgrade_schedule_tail(sim, self.tail_cells, cache=self._cells[1])
        return list_schedule_tail(sim, self.tail_cells)


__all__ = ["TAILS", "NetworkRollouts", "RolloutStats", "TailKind"]
