"""How much truncating a network's rollouts changes its labels.

Expert iteration labels a decision by the cheapest of its actions when a trained network decides
everything after it (:class:`~crius_gym.rl.network_rollouts.NetworkRollouts`). A rollout may stop
``horizon_s`` simulated seconds after the decision, the rest valued by a tail (a list schedule,
the list schedule with Crius's upgrades, or the rest at current speeds); that is cheaper, and
biased wherever the network would not schedule the way the tail does.
:func:`audit_truncation` runs the network (masked argmax) on held-out traces and, at every
``every``-th decision with a choice, values every valid action by full rollouts and by rollouts
truncated at each horizon: the share of decisions whose best action is unchanged (the issue's
measure of the truncation's bias), the share whose truncated label costs no more than the full
one by full rollouts (ties: two actions whose rollouts end in the same schedule), and the JCT the
truncated label loses against the full one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from sb3_contrib import MaskablePPO

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.rl.network_rollouts import NetworkRollouts, TailKind
from crius_gym.scenarios.spec import Scenario


@dataclass(frozen=True)
class TruncationRow:
    """One decision valued with full and truncated network rollouts.

    Attributes:
        trace: the held-out trace's name.
        decision: the env decision's index in the episode.
        actions: valid actions valued.
        own: the network's own action there (masked argmax).
        wait: whether the full label is WAIT.
        full: the full rollouts' label (cheapest action).
        full_gain_s: Σ JCT the full label saves against the network's own action.
        full_s: wall time of the full rollouts of this decision.
        truncated: (tail, horizon in s) → the truncated label.
        lost_s: (tail, horizon) → Σ JCT (by full rollouts) the truncated label loses against
            the full one.
        truncated_s: (tail, horizon) → wall time of the truncated rollouts.
    """

    trace: str
    decision: int
    actions: int
    own: int
    wait: bool
    full: int
    full_gain_s: float
    full_s: float
    truncated: dict[tuple[str, float], int] = field(default_factory=dict)
    lost_s: dict[tuple[str, float], float] = field(default_factory=dict)
    truncated_s: dict[tuple[str, float], float] = field(default_factory=dict)


def _cheapest(actions: Sequence[int], costs: Sequence[float], prefer: int) -> int:
    """The cheapest action; ``prefer`` on ties."""
    return min(zip(actions, costs, strict=True), key=lambda ac: (ac[1], ac[0] != prefer))[0]


def audit_truncation(
    model: MaskablePPO,
    config: EnvConfig,
    scenario: Scenario,
    split: str,
    traces: Sequence[int],
    every: int,
    horizons_s: Sequence[float],
    tails: Sequence[TailKind] = ("list",),
) -> list[TruncationRow]:
    """Value sampled decisions of the network's own runs with full and truncated rollouts.

    Args:
        model: the network (the rollout policy, and the policy whose runs are sampled).
        config: the env settings it was trained with.
        scenario: a plain scenario (not a mixture).
        split: ``val`` or ``test``.
        traces: indices of the split's traces.
        every: value one decision with a choice in this many.
        horizons_s: truncation horizons to compare with the full rollouts (simulated seconds).
        tails: how the truncated rollouts value the rest; each with each horizon.

    Returns:
        One :class:`TruncationRow` per valued decision, in run order.
    """
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    env = CriusEnv(scenario, dataclasses.replace(config, max_decisions=10**12))
    full = NetworkRollouts(model, None)
    cut = {(t, h): NetworkRollouts(model, h, tail=t) for t in tails for h in horizons_s}
    out: list[TruncationRow] = []
    for index in traces:
        obs, _ = env.reset(options={"split": split, "index": int(index)})
        name = env.trace.name if env.trace is not None else f"{split}-{index}"
        seen = 0
        for decision in range(10**9):
            mask = env.action_masks()
            wait = len(mask) - 1  # the last action is WAIT
            own = int(np.argmax(np.where(mask, full.logits([obs])[0], -np.inf)))
            valid = [int(a) for a in np.flatnonzero(mask)]
            if len(valid) > 1:
                seen += 1
                if seen % every == 0:
                    t0 = time.perf_counter()
                    costs = full.costs(env, valid)
                    full_s = time.perf_counter() - t0
                    best = _cheapest(valid, costs, own)
                    gain_s = costs[valid.index(own)] - costs[valid.index(best)]
                    row = TruncationRow(
                        name, decision, len(valid), own, best == wait, best, gain_s, full_s
                    )
                    for key, rollouts in cut.items():
                        t0 = time.perf_counter()
                        label = _cheapest(valid, rollouts.costs(env, valid), own)
                        row.truncated_s[key] = time.perf_counter() - t0
                        row.truncated[key] = label
                        row.lost_s[key] = costs[valid.index(label)] - costs[valid.index(best)]
                    out.append(row)
            obs, _, term, trunc, _ = env.step(own)
            if term or trunc:
                break
    return out


__all__ = ["TruncationRow", "audit_truncation"]
