"""Expert iteration: the distilled network becomes the rollout policy of the next round.

One round of vine training labels decisions by rollouts of a *rollout policy* and distils the
labels into the network. With Crius as the rollout policy that is one step of policy improvement
over Crius; with the network of the previous round it is the next step (expert iteration,
Anthony et al. 2017; approximate policy iteration, Bertsekas 2011). This module holds what a
driver of such rounds needs, independent of how a round is trained:

* :func:`round_overrides`: the hyperparameters of round k (present labels, so a label is a
  function of the state; the bare network, so no guide margin and no envelope are selected; from
  round 1 on, the previous kept network as rollout policy and as initial weights, with no
  behaviour cloning of Crius on top of them);
* :func:`bare_validation`: the network as deployed without margin or envelope (the masked
  argmax), scored on validation traces of each scenario by its mean JCT ratio to Crius;
* :class:`IterationLog`: the rounds run so far, written atomically after every round, so an
  interrupted driver resumes at the first round not finished;
* the keep rule: a round is kept only if its score beats the best kept round's by more than a
  tolerance; otherwise the next round starts again from the best kept network.

``experiments/expert_iteration.py`` is the driver.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from crius_gym.atomic import atomic_write_text
from crius_gym.errors import InputFileError
from crius_gym.yamlfile import load_yaml_file

#: Hyperparameters every round shares: present (no-future) labels and the bare network.
BASE_OVERRIDES: tuple[str, ...] = (
    "vine_future=false",
    "deploy_margins=[]",
    "deploy_envelope_episodes=0",
)


def round_overrides(previous: Path | None, horizon_s: float | None) -> list[str]:
    """The ``--set`` overrides of a round.

    Args:
        previous: the best kept network so far (a saved policy's ``.zip``), or None for round 0
            (Crius is the rollout policy).
        horizon_s: truncate the network's rollouts this many simulated seconds after the
            decision (None: to the end of the jobs present).

    Returns:
        ``key=value`` strings for ``train_ppo.py --set``.
    """
    out = list(BASE_OVERRIDES)
    if previous is not None:
        # Starting from the previous network: no behaviour cloning of Crius on top of it.
        out += [f"vine_rollout_policy={previous}", f"init_policy={previous}", "bc_epochs=0"]
        if horizon_s is not None:
            out.append(f"vine_horizon_s={horizon_s:g}")
    return out


@dataclass(frozen=True)
class RoundRecord:
    """One finished round.

    Attributes:
        index: round number (0: Crius rolls out).
        run: the training run's name.
        model: the round's network (``best_model.zip``).
        rollout_policy: the network that labelled it (None: Crius).
        per_scenario: scenario → mean JCT ratio to Crius of the bare network on its traces.
        score: the mean of ``per_scenario`` (lower is better).
        kept: whether the round beat the best kept round.
        train_seconds: wall time of its training.
    """

    index: int
    run: str
    model: str
    rollout_policy: str | None
    per_scenario: dict[str, float]
    score: float
    kept: bool
    train_seconds: float = 0.0


def keep_round(score: float, best: float | None, tolerance: float) -> bool:
    """Whether a round with ``score`` replaces the best kept one (``best``; None: none yet)."""
    if not math.isfinite(score):
        return False
    return best is None or score < best - tolerance


@dataclass
class IterationLog:
    """The rounds of one driver run, stored as YAML (atomic writes).

    Attributes:
        path: the YAML file.
        settings: what the run was started with; a resume must match it.
        rounds: finished rounds in order.
    """

    path: Path
    settings: dict[str, Any]
    rounds: list[RoundRecord] = field(default_factory=list)

    @classmethod
    def open(cls, path: Path, settings: dict[str, Any]) -> IterationLog:
        """The log at ``path`` (a new one if absent).

        Raises:
            InputFileError: the file is malformed, or was started with other settings.
        """
        if not path.is_file():
            return cls(path, dict(settings))
        try:
            raw = load_yaml_file(path) or {}
            rounds = [RoundRecord(**r) for r in raw.get("rounds") or []]
        except (TypeError, AttributeError) as exc:
            raise InputFileError(path, f"not an expert-iteration log: {exc}") from None
        saved = raw.get("settings") or {}
        diff = sorted(k for k in set(saved) | set(settings) if saved.get(k) != settings.get(k))
        if diff:
            raise InputFileError(
                path,
                "started with other settings; use another --name or the same options",
                field=", ".join(diff),
            )
        return cls(path, saved, rounds)

    @property
    def best(self) -> RoundRecord | None:
        """The last kept round (the best so far), or None."""
        kept = [r for r in self.rounds if r.kept]
        return kept[-1] if kept else None

    def add(self, record: RoundRecord) -> None:
        """Append a finished round and write the file."""
        self.rounds.append(record)
        body = {"settings": self.settings, "rounds": [asdict(r) for r in self.rounds]}
        atomic_write_text(self.path, yaml.safe_dump(body, sort_keys=False))


def bare_validation(
    model_path: Path,
    scenarios: Sequence[str],
    traces: int,
    log: Callable[[str], None] | None = None,
) -> dict[str, float]:
    """The bare network's mean JCT ratio to Crius on each scenario's validation traces.

    The network runs as deployed with no guide margin and no envelope (the masked argmax), with
    the env settings it was trained with, on the first ``traces`` synthetic validation traces of
    each scenario; Crius runs through the same env.

    Args:
        model_path: a saved policy (``.zip`` or its folder).
        scenarios: scenario names.
        traces: validation traces per scenario.
        log: progress lines.

    Returns:
        scenario → mean per-trace ratio of average JCT (network / Crius).
    """
    # Imported here: the RL stack is heavy and the rest of this module is bookkeeping.
    from crius_gym.env.cluster_env import CriusEnv
    from crius_gym.env.config import EnvConfig
    from crius_gym.rl.deviation import select_guide_margin
    from crius_gym.rl.saved import load_policy, policy_file, read_metadata
    from crius_gym.scenarios import load_scenario

    path = policy_file(model_path)
    meta = read_metadata(path)
    cfg = EnvConfig(**dict(meta.get("env_config") or {}))
    loaded = [load_scenario(name) for name in scenarios]
    model, _ = load_policy(path, CriusEnv(loaded[0], cfg))
    sel = select_guide_margin(model, cfg, loaded, traces=traces, margins=[0.0], log=log)
    return {sc.name: sel.per_scenario[(sc.name, 0.0)] for sc in loaded}


def mean_score(per_scenario: dict[str, float]) -> float:
    """The mean over scenarios (nan-free; inf when any is missing)."""
    vals = list(per_scenario.values())
    if not vals or any(not math.isfinite(v) for v in vals):
        return math.inf
    return float(np.mean(vals))


__all__ = [
    "BASE_OVERRIDES",
    "IterationLog",
    "RoundRecord",
    "bare_validation",
    "keep_round",
    "mean_score",
    "round_overrides",
]
