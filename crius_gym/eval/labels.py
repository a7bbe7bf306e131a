"""Two kinds of rollout labels on the same decisions: hindsight against the jobs present.

A vine label is the cheapest of a decision's evaluated actions when the guide (Crius) takes over
after it (:meth:`~crius_gym.env.cluster_env.CriusEnv.rollout_cost`). A *hindsight* label rolls out
on the episode's trace, arrivals still to come included, so part of it depends on what no
observation shows; a *present* label rolls out over the jobs already arrived, priced by the
estimator (the lookahead scheduler's label, :mod:`crius_gym.policies.lookahead`, restricted to
the env's actions): a function of the state. :func:`compare_labels` runs the guide through the
env on held-out traces and, at every ``every``-th decision with a choice, labels it both ways:
how often the labels agree, how often each departs from the guide, what each costs to compute,
and what the present label is worth when judged by hindsight (the total JCT it saves against
the guide's action, with the future that did arrive).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.env.config import EnvConfig
from crius_gym.scenarios.spec import Scenario


@dataclass(frozen=True)
class LabelPair:
    """One decision labelled both ways.

    Attributes:
        trace: the held-out trace's name.
        decision: the env decision's index in the episode.
        actions: valid actions evaluated.
        guide: the guide's env action.
        hindsight: the hindsight label (cheapest action, the guide's on ties).
        present: the present label.
        hindsight_gain_s: Σ JCT the hindsight label saves against the guide's, by hindsight.
        present_gain_s: Σ JCT the present label saves against the guide's, by hindsight
            (negative: it costs JCT with the future that did arrive).
        hindsight_s: wall time of the hindsight rollouts of this decision.
        present_s: wall time of the present rollouts.
    """

    trace: str
    decision: int
    actions: int
    guide: int
    hindsight: int
    present: int
    hindsight_gain_s: float
    present_gain_s: float
    hindsight_s: float
    present_s: float


def _label(costs: dict[int, float], guide: int) -> int:
    """The cheapest action; the guide's when it ties."""
    return min(costs, key=lambda a: (costs[a], a != guide))


def compare_labels(
    scenario: Scenario,
    config: EnvConfig,
    split: str,
    traces: Sequence[int],
    every: int,
) -> list[LabelPair]:
    """Label every ``every``-th decision of the guide's run of each trace both ways.

    Args:
        scenario: the scenario (a plain one, not a mixture).
        config: env settings (the guide must be set).
        split: ``val`` or ``test``.
        traces: indices of the split's traces.
        every: label one decision with a choice in this many.

    Returns:
        One :class:`LabelPair` per labelled decision, in run order.
    """
    if every < 1:
        raise ValueError(f"every must be >= 1, got {every}")
    env = CriusEnv(scenario, dataclasses.replace(config, max_decisions=10**12))
    out: list[LabelPair] = []
    for index in traces:
        env.reset(options={"split": split, "index": int(index)})
        name = env.trace.name if env.trace is not None else f"{split}-{index}"
        seen = 0
        for decision in range(10**9):
            mask = env.action_masks()
            guide = env.guide_action()
            assert guide is not None
            valid = [int(a) for a in np.flatnonzero(mask)]
            if len(valid) > 1:
                seen += 1
                if seen % every == 0:
                    t0 = time.perf_counter()
                    hind = {a: env.rollout_cost(a, future=True) for a in valid}
                    t1 = time.perf_counter()
                    pres = {a: env.rollout_cost(a, future=False) for a in valid}
                    t2 = time.perf_counter()
                    h, p = _label(hind, guide), _label(pres, guide)
                    out.append(
                        LabelPair(
                            name,
                            decision,
                            len(valid),
                            guide,
                            h,
                            p,
                            hind[guide] - hind[h],
                            hind[guide] - hind[p],
                            t1 - t0,
                            t2 - t1,
                        )
                    )
            _, _, term, trunc, _ = env.step(guide)
            if term or trunc:
                break
    return out


__all__ = ["LabelPair", "compare_labels"]
