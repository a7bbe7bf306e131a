"""Distil the lookahead scheduler into the network: DAgger with lookahead labels.

The teacher is :class:`~crius_gym.policies.lookahead.LookaheadPolicy` (Crius with online
lookahead over the jobs present): its choice is a function of the state, so it can be learned
(``docs/lookahead.md``). Vine labels (:mod:`crius_gym.rl.sequence_ppo`) give the same kind of
label at 2% of the decisions of a PPO run; here every decision of an episode is labelled, and
the states are the ones the network itself reaches (DAgger, Ross, Gordon & Bagnell,
AISTATS 2011): in round *k* the executed action is the teacher's with probability β_k and the
network's otherwise, every visited state is labelled by the teacher, the labels of all rounds
are pooled, and the network is trained on them by masked cross-entropy
(:func:`~crius_gym.rl.imitation.behaviour_clone`).

The label of a state is the teacher's first action at that instant with its candidates
restricted to those the env can express now (:class:`EnvLookahead`): the teacher's best
expressible action, not its best action dropped when the env cannot show it. The teacher's
rollout policy is the env's guide (Crius with the bookkeeping of this episode), rollouts hold
only the jobs already arrived (``Snapshot.fork``), so no label reads the episode's future.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from crius_gym.atomic import atomic_path
from crius_gym.env.cluster_env import CriusEnv
from crius_gym.policies.lookahead import LookaheadOptions, LookaheadPolicy
from crius_gym.rl.agent import GreedyActor
from crius_gym.rl.imitation import Demonstrations, discounted_returns
from crius_gym.sim.actions import Action
from crius_gym.sim.policy import Policy
from crius_gym.sim.simulator import Simulator
from crius_gym.sim.snapshot import Snapshot


class EnvLookahead(LookaheadPolicy):
    """The lookahead restricted to the actions an env can take now.

    Args:
        env: the env whose current state is labelled (its mask and action indices).
        options: the lookahead's settings; ``max_steps`` is forced to 1 (one label per state).
    """

    def __init__(self, env: CriusEnv, options: LookaheadOptions) -> None:
        assert env.guide is not None, "the teacher's rollout policy is the env's guide"
        super().__init__(replace(options, max_steps=1), base=env.guide.policy)
        self._env = env
        self._mask = env.action_masks()
        self._offered = 0
        # The proposal is the env's guide's (its plan for this instant, as followed so far),
        # so Crius's action here is the one the env offers and vine labels compare against.
        self._guide_plan: list[Action] | None = list(env._guide_plan().actions)
        self.regret = float("nan")  # of the last label: see :meth:`label`
        #: Rollout cost (job-seconds) of each env action the last label compared, NaN elsewhere.
        self.costs = np.full(len(self._mask), np.nan, dtype=np.float32)

    def _plan(self, base: Policy, work: Simulator) -> list[Action]:
        if self._guide_plan is not None:
            plan, self._guide_plan = self._guide_plan, None
            return plan
        return super()._plan(base, work)

    def _candidates(self, snap: Snapshot, proposal: Action | None) -> list[Action | None]:
        wait = len(self._mask) - 1
        out: list[Action | None] = []
        for cand in super()._candidates(snap, proposal):
            index = wait if cand is None else self._env.action_index(cand)
            if index is not None and self._mask[index]:
                out.append(cand)
        self._offered = len(out)
        return out

    def _pick(
        self, candidates: Sequence[Action | None], costs: Sequence[float], proposal: Action | None
    ) -> Action | None:
        # The guide's proposal may be one the env cannot express (then it is not a candidate).
        pick = super()._pick(candidates, costs, proposal if proposal in candidates else None)
        wait = len(self._mask) - 1
        for cand, cost in zip(candidates, costs, strict=True):
            index = wait if cand is None else self._env.action_index(cand)
            if index is not None and math.isfinite(cost):
                self.costs[index] = cost
        chosen = costs[candidates.index(pick)]
        others = [
            c - chosen for a, c in zip(candidates, costs, strict=True) if a != pick and c < math.inf
        ]
        if others and chosen > 0 and math.isfinite(chosen):
            self.regret = sum(others) / len(others) / chosen
        return pick

    def label(self) -> int | None:
        """The env action the teacher chooses now (None: it has nothing the env can express).

        After it, :attr:`regret` is what a wrong choice costs here: the mean over the other
        candidates of their rollout cost above the chosen one's, relative to it (NaN when the
        teacher compared nothing), and :attr:`costs` holds every compared candidate's rollout
        cost at its env action index (the soft targets of
        :func:`~crius_gym.rl.imitation.soft_targets`).
        """
        chosen = self.decide(self._env.sim.snapshot())
        wait = len(self._mask) - 1
        if not chosen:  # WAIT chosen, or nothing expressible offered
            return wait if self._offered and self._mask[wait] else None
        index = self._env.action_index(chosen[0])
        return index if index is not None and self._mask[index] else None


@dataclass
class StateLabel:
    """A teacher's label of one state.

    Attributes:
        action: the env action chosen (None: nothing the env can express was offered).
        regret: what a wrong choice costs here: the mean over the other candidates of their
            rollout cost above the chosen one's, relative to it (NaN: nothing compared).
        costs: each compared candidate's rollout cost at its env action index, NaN elsewhere.
        rollouts: rollouts run for it.
    """

    action: int | None
    regret: float
    costs: np.ndarray
    rollouts: int


class Teacher(Protocol):
    """Labels the state of an env (its current decision), leaving the env as it was."""

    def __call__(self, env: CriusEnv, obs: dict[str, np.ndarray], mask: np.ndarray) -> StateLabel:
        """The label of ``env``'s current state (``obs``, ``mask``: its observation, mask)."""
        ...


@dataclass(frozen=True)
class LookaheadTeacher:
    """The lookahead scheduler with Crius (the env's guide) as rollout policy, as a teacher.

    Attributes:
        options: the lookahead's settings.
    """

    options: LookaheadOptions

    def __call__(self, env: CriusEnv, obs: dict[str, np.ndarray], mask: np.ndarray) -> StateLabel:
        """The lookahead's best action among those the env can express (:class:`EnvLookahead`)."""
        teacher = EnvLookahead(env, self.options)
        action = teacher.label()
        return StateLabel(action, teacher.regret, teacher.costs, teacher.stats.rollouts)


@dataclass
class LabelStats:
    """What a round of labelling did.

    Attributes:
        episodes: episodes run.
        labels: labelled states.
        unlabelled: states with a choice but no expressible label.
        agree: labels equal to the network's own action.
        guide: labels equal to the guide's (Crius's) action.
        teacher_steps: steps that executed the teacher's action (β).
        label_s: wall time spent labelling.
        rollouts: the teacher's rollouts over all labelled states.
        waiting_max: most jobs waiting at a labelled state.
        running_max: most jobs running at a labelled state.
    """

    episodes: int = 0
    labels: int = 0
    unlabelled: int = 0
    agree: int = 0
    guide: int = 0
    teacher_steps: int = 0
    label_s: float = 0.0
    rollouts: int = 0
    waiting_max: int = 0
    running_max: int = 0

    @property
    def ms_per_label(self) -> float:
        """Mean labelling time per state (ms)."""
        n = self.labels + self.unlabelled
        return 1000.0 * self.label_s / n if n else float("nan")

    @property
    def rollouts_per_label(self) -> float:
        """Mean teacher rollouts per state with a choice."""
        n = self.labels + self.unlabelled
        return self.rollouts / n if n else float("nan")

    def __add__(self, other: LabelStats) -> LabelStats:
        """Two batches of episodes together (counts add, maxima take the larger)."""
        return LabelStats(
            **{
                f.name: max(getattr(self, f.name), getattr(other, f.name))
                if f.name.endswith("_max")
                else getattr(self, f.name) + getattr(other, f.name)
                for f in fields(self)
            }
        )

    def summary(self) -> dict[str, float]:
        """The counts with the shares and the cost per label, for a report."""
        n = max(1, self.labels)
        return {
            **asdict(self),
            "agree_with_driver": self.agree / n,
            "label_is_crius": self.guide / n,
            "ms_per_label": self.ms_per_label,
            "rollouts_per_label": self.rollouts_per_label,
        }


def collect_dagger(
    env: CriusEnv,
    actor: GreedyActor,
    options: LookaheadOptions | Teacher,
    episode_seeds: Sequence[int],
    beta: float,
    rng: np.random.Generator,
    gamma: float = 0.995,
    log: Callable[[str], None] | None = None,
) -> tuple[Demonstrations, LabelStats]:
    """Run episodes of the env, label every state with a choice by the lookahead.

    Args:
        env: a training env with a guide (its episodes are drawn by ``env.reset(seed=...)``).
        actor: the network's greedy actor (bare: no margin, no envelope).
        options: the teacher: the lookahead's settings (Crius as its rollout policy) or any
            :class:`Teacher` (e.g. the network lookahead, expert iteration's teacher).
        episode_seeds: one episode per seed.
        beta: probability of executing the teacher's label instead of the network's action.
        rng: draws the β coin.
        gamma: discount of the returns kept for the value head.
        log: a callable taking a progress line (None: silent).

    Returns:
        the labelled states and the round's statistics.
    """
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    teach: Teacher = LookaheadTeacher(options) if isinstance(options, LookaheadOptions) else options
    stats = LabelStats()
    rows: list[dict[str, np.ndarray]] = []
    masks: list[np.ndarray] = []
    actions: list[int] = []
    returns: list[float] = []
    regrets: list[float] = []
    costs: list[np.ndarray] = []
    for seed in episode_seeds:
        t0 = time.perf_counter()
        obs, info = env.reset(seed=int(seed))
        ep_rows: list[tuple[dict[str, np.ndarray], np.ndarray, int, float, np.ndarray]] = []
        ep_label_step: list[int] = []
        rewards: list[float] = []
        while True:
            mask = env.action_masks()
            own = actor(obs, mask)
            action = own
            if mask[:-1].any():
                t = time.perf_counter()
                taught = teach(env, obs, mask)
                label = taught.action
                stats.label_s += time.perf_counter() - t
                stats.rollouts += taught.rollouts
                if label is None:
                    stats.unlabelled += 1
                else:
                    stats.labels += 1
                    stats.agree += int(label == own)
                    stats.guide += int(label == env.guide_action())
                    stats.waiting_max = max(stats.waiting_max, int(info.get("waiting", 0)))
                    stats.running_max = max(stats.running_max, int(info.get("running", 0)))
                    ep_rows.append((obs, mask, label, taught.regret, taught.costs))
                    ep_label_step.append(len(rewards))
                    if beta > 0 and rng.random() < beta:
                        action = label
                        stats.teacher_steps += 1
            obs, reward, term, trunc, info = env.step(action)
            rewards.append(float(reward))
            if term or trunc:
                break
        rets = discounted_returns(rewards, gamma)
        for (o, m, a, r, c), step in zip(ep_rows, ep_label_step, strict=True):
            rows.append(o)
            masks.append(m)
            actions.append(a)
            returns.append(rets[step])
            regrets.append(r)
            costs.append(c)
        stats.episodes += 1
        if log is not None:
            log(
                f"  episode {stats.episodes}/{len(episode_seeds)}: {len(ep_rows)} labels, "
                f"{time.perf_counter() - t0:.1f} s"
            )
    stacked = {k: np.stack([o[k] for o in rows]) for k in rows[0]} if rows else {}
    demos = Demonstrations(
        stacked,
        np.array(masks, dtype=bool),
        np.array(actions, dtype=np.int64),
        np.array(returns, dtype=np.float32),
        stats.episodes,
        stats.unlabelled,
        np.array(regrets, dtype=np.float64),
        np.array(costs, dtype=np.float32).reshape(len(costs), env.config.num_actions),
    )
    return demos, stats


def save_demonstrations(demos: Demonstrations, path: str | Path) -> None:
    """Write labelled states to an ``.npz`` file atomically (an interrupted write leaves none)."""
    arrays: dict[str, Any] = {
        "masks": demos.masks,
        "actions": demos.actions,
        "returns": demos.returns,
        "meta": np.array([demos.episodes, demos.skipped]),
        **({} if demos.regrets is None else {"regrets": demos.regrets}),
        **({} if demos.costs is None else {"costs": demos.costs}),
        **{f"obs_{k}": v for k, v in demos.obs.items()},
    }
    with atomic_path(path) as tmp:
        np.savez(tmp, **arrays)


def load_demonstrations(path: str | Path) -> Demonstrations:
    """Read labelled states written by :func:`save_demonstrations`."""
    with np.load(path) as data:
        obs = {k[4:]: data[k] for k in data.files if k.startswith("obs_")}
        episodes, skipped = (int(x) for x in data["meta"])
        # Files written before regrets were recorded have none: NaN, weighed as the mean.
        regrets = (
            data["regrets"] if "regrets" in data.files else np.full(len(data["actions"]), np.nan)
        )
        # ... and no candidate costs: NaN rows, which soft targets read as the hard label.
        costs = (
            data["costs"]
            if "costs" in data.files
            else np.full(data["masks"].shape, np.nan, dtype=np.float32)
        )
        return Demonstrations(
            obs, data["masks"], data["actions"], data["returns"], episodes, skipped, regrets, costs
        )


def pool(parts: Sequence[Demonstrations]) -> Demonstrations:
    """The labelled states of several rounds together."""
    parts = [p for p in parts if len(p)]
    if not parts:
        raise ValueError("no labelled states to pool")
    return Demonstrations(
        {k: np.concatenate([p.obs[k] for p in parts]) for k in parts[0].obs},
        np.concatenate([p.masks for p in parts]),
        np.concatenate([p.actions for p in parts]),
        np.concatenate([p.returns for p in parts]),
        sum(p.episodes for p in parts),
        sum(p.skipped for p in parts),
        np.concatenate(
            [p.regrets if p.regrets is not None else np.full(len(p), np.nan) for p in parts]
        ),
        np.concatenate(
            [
                p.costs if p.costs is not None else np.full(p.masks.shape, np.nan, np.float32)
                for p in parts
            ]
        ),
    )


__all__ = [
    "EnvLookahead",
    "LabelStats",
    "LookaheadTeacher",
    "StateLabel",
    "Teacher",
    "collect_dagger",
    "load_demonstrations",
    "pool",
    "save_demonstrations",
]
