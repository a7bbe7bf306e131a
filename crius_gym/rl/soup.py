"""Weight averaging of networks fine-tuned from one start: model soups.

Networks distilled from the same initial weights (the DAgger rounds and seeds of
``experiments/distill_lookahead.py`` all start from the reference policy) stay in one basin of
the loss, so the average of their weights is itself a good network, often better than each
(Wortsman et al., "Model soups", ICML 2022). A *greedy soup* orders the candidates by their
own validation score and adds each one only if the average with it scores better; the result
is one network, deployed and timed like any other.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from sb3_contrib import MaskablePPO

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.rl.saved import PolicyCompatibilityError, load_policy, policy_file


def average_weights(paths: Sequence[str | Path], env: CriusEnv) -> MaskablePPO:
    """The first policy with its weights replaced by the mean of all the policies' weights.

    Args:
        paths: saved policies (``.zip`` or their folders) of one network shape.
        env: an env the policies run in (their compatibility is checked as for loading).

    Raises:
        ValueError: no policies.
        PolicyCompatibilityError: a policy of another network (class, options or a weight's
            shape), naming its file and what differs.
    """
    if not paths:
        raise ValueError("a soup needs at least one policy")
    models = [load_policy(policy_file(p), env)[0] for p in paths]
    first = models[0]
    states = [m.policy.state_dict() for m in models]
    for path, model, state in zip(paths, models, states, strict=True):
        why = _difference(first, model, states[0], state)
        if why:
            raise PolicyCompatibilityError(
                f"{policy_file(path)}: not the network of {policy_file(paths[0])} ({why}); "
                "only networks of one shape average"
            )
    mean = {
        key: (torch.stack([s[key].float() for s in states]).mean(dim=0)).to(value.dtype)
        if value.is_floating_point()
        else value
        for key, value in states[0].items()
    }
    first.policy.load_state_dict(mean)
    return first


def _difference(
    a: MaskablePPO, b: MaskablePPO, sa: dict[str, torch.Tensor], sb: dict[str, torch.Tensor]
) -> str:
    """Why two policies cannot be averaged ('' if they can)."""
    if type(a.policy) is not type(b.policy):
        return f"policy class {type(b.policy).__name__} vs {type(a.policy).__name__}"
    if dict(a.policy_kwargs) != dict(b.policy_kwargs):
        return f"policy_kwargs {dict(b.policy_kwargs)} vs {dict(a.policy_kwargs)}"
    if sa.keys() != sb.keys():
        return f"weights {sorted(set(sa) ^ set(sb))} in only one of them"
    for key, value in sa.items():
        if sb[key].shape != value.shape:
            return f"{key} has shape {tuple(sb[key].shape)} vs {tuple(value.shape)}"
    return ""


@dataclass
class SoupResult:
    """What a greedy soup tried.

    Attributes:
        members: the policies averaged in the result, in the order added.
        score: the result's validation score (lower is better).
        alone: each candidate's own score.
        tried: (candidate, score of the soup with it, kept) in the order tried.
    """

    members: list[str]
    score: float
    alone: dict[str, float] = field(default_factory=dict)
    tried: list[tuple[str, float, bool]] = field(default_factory=list)


def greedy_soup(
    candidates: Sequence[str],
    score: Callable[[list[str]], float],
    tolerance: float = 0.0,
    log: Callable[[str], None] | None = None,
) -> SoupResult:
    """Greedy soup: the best candidate alone, then each next-best added if the soup improves.

    Args:
        candidates: policies (paths) of one network shape.
        score: a list of policies → the validation score of their average (lower is better).
        tolerance: a candidate is added only if the score falls by more than this.
        log: progress lines.

    Returns:
        The members kept, their score and every score measured.
    """
    say = log or (lambda _line: None)
    alone: dict[str, float] = {}
    for c in candidates:
        alone[c] = score([c])
        say(f"alone: {c}: {alone[c]:.4f}")
    order = sorted(candidates, key=lambda c: alone[c])
    members, best = [order[0]], alone[order[0]]
    result = SoupResult(members, best, alone)
    for c in order[1:]:
        s = score([*members, c])
        kept = s < best - tolerance
        result.tried.append((c, s, kept))
        say(f"with {c}: {s:.4f} ({'kept' if kept else 'dropped'})")
        if kept:
            members, best = [*members, c], s
    result.members, result.score = members, best
    return result


def describe(result: SoupResult) -> dict[str, Any]:
    """A YAML-ready record of a soup (for its policy's metadata)."""
    return {
        "members": list(result.members),
        "score": result.score,
        "alone": dict(result.alone),
        "tried": [{"policy": c, "score": s, "kept": k} for c, s, k in result.tried],
    }


__all__ = ["SoupResult", "average_weights", "describe", "greedy_soup"]
