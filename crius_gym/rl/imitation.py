"""Warm start: a policy that is the Crius heuristic, and a critic that knows its returns.

The heuristic runs through an env with ``stop_at_every_event`` (see
:class:`~crius_gym.rl.agent.HeuristicDriver`); every decision where the agent would have had a
choice becomes a labelled example (observation, mask, the heuristic's env action — WAIT when it
chose to start nothing more). Decisions the action space cannot express carry no label and are
skipped. :func:`behaviour_clone` trains the policy by masked cross-entropy (and the value head on
the expert's returns; DL2's supervised warm-up, Peng et al., arXiv 1909.06040);
:func:`agreement` measures how often the policy's most likely action is the heuristic's on
held-out decisions. With the guide's hint and the residual network
(:mod:`crius_gym.rl.networks`) the untrained policy already is the heuristic, and cloning is
optional. :func:`pretrain_critic` then regresses the value head on the returns of the policy's
own rollouts, as PPO will sample them, so the first PPO updates do not start from a critic that
knows nothing (actor-only pre-training shows an early dip: arXiv 2602.23804).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.utils import obs_as_tensor

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.policies.registry import make_policy
from crius_gym.rl.agent import HeuristicDriver
from crius_gym.workload.job import Trace


@dataclass
class Demonstrations:
    """Labelled decisions.

    Attributes:
        obs: observations (dict of stacked arrays).
        masks: action masks.
        actions: the expert's env actions.
        returns: discounted return from each decision.
        episodes: expert episodes run.
        skipped: decisions without a label (inexpressible expert actions).
        regrets: per decision, what a wrong choice costs there (the lookahead teacher's mean
            relative cost of its other candidates above its choice; None: not recorded).
        costs: per decision and env action, the teacher's rollout cost of that action
            (job-seconds; NaN where it compared none; None: not recorded).
    """

    obs: dict[str, np.ndarray]
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    episodes: int
    skipped: int
    regrets: np.ndarray | None = None
    costs: np.ndarray | None = None

    def subset(self, idx: np.ndarray) -> Demonstrations:
        """The decisions at positions ``idx``."""
        return Demonstrations(
            {key: v[idx] for key, v in self.obs.items()},
            self.masks[idx],
            self.actions[idx],
            self.returns[idx],
            self.episodes,
            self.skipped,
            None if self.regrets is None else self.regrets[idx],
            None if self.costs is None else self.costs[idx],
        )

    def __len__(self) -> int:
        return len(self.actions)


def discounted_returns(rewards: Sequence[float], gamma: float) -> list[float]:
    """The discounted return from each step of one episode (``rewards`` in step order)."""
    g, out = 0.0, []
    for r in reversed(rewards):
        g = r + gamma * g
        out.append(g)
    out.reverse()
    return out


def collect_demonstrations(
    env: CriusEnv,
    expert: str,
    episodes: int,
    gamma: float,
    seed: int = 0,
    traces: Sequence[Trace] | None = None,
) -> Demonstrations:
    """Run the expert on ``episodes`` training episodes of the env's scenario (or on ``traces``)."""
    # A mixture's env builds one tuner per component; a single scenario's shares the env's.
    tuner = None if env.scenario.mix else env.tuner
    demo_env = CriusEnv(
        env.scenario, dataclasses.replace(env.config, stop_at_every_event=True), tuner=tuner
    )
    wait = demo_env.config.num_actions - 1
    obs_rows: list[dict[str, np.ndarray]] = []
    masks, actions, returns = [], [], []
    skipped = 0
    runs: Sequence[Trace | None] = list(traces) if traces is not None else [None] * episodes
    for ep, trace in enumerate(runs):
        steps: list[tuple[dict[str, np.ndarray], np.ndarray, int]] = []
        rewards: list[float] = []

        def observe(
            obs: dict[str, np.ndarray],
            mask: np.ndarray,
            action: int,
            reward: float,
            steps: list[tuple[dict[str, np.ndarray], np.ndarray, int]] = steps,
            rewards: list[float] = rewards,
        ) -> None:
            steps.append((obs, mask, action))
            rewards.append(reward)

        HeuristicDriver(make_policy(expert, scenario=env.scenario), seed=seed + ep).run(
            demo_env, trace, observe=observe, reset_seed=seed + ep
        )
        rets = discounted_returns(rewards, gamma)
        for (obs, mask, action), ret in zip(steps, rets, strict=True):
            if not mask[:-1].any():
                continue  # the training env would not have asked: no choice
            if action != wait and not mask[action]:
                skipped += 1
                continue
            obs_rows.append(obs)
            masks.append(mask)
            actions.append(action)
            returns.append(ret)
    stacked = {k: np.stack([o[k] for o in obs_rows]) for k in obs_rows[0]} if obs_rows else {}
    return Demonstrations(
        stacked,
        np.array(masks),
        np.array(actions, dtype=np.int64),
        np.array(returns, dtype=np.float32),
        len(runs),
        skipped,
    )


def agreement(model: MaskablePPO, demos: Demonstrations, batch_size: int = 512) -> float:
    """Share of the demonstrations where the policy's most likely action is the expert's."""
    if len(demos) == 0:
        return float("nan")
    return float(np.mean(greedy_actions(model, demos, batch_size) == demos.actions))


def greedy_actions(model: MaskablePPO, demos: Demonstrations, batch_size: int = 512) -> np.ndarray:
    """The policy's most likely (masked) action at each demonstrated decision."""
    policy = model.policy
    preds = [np.zeros(0, dtype=np.int64)]
    with torch.no_grad():
        for start in range(0, len(demos), batch_size):
            sl = slice(start, start + batch_size)
            obs = cast(
                torch.Tensor, obs_as_tensor({k: v[sl] for k, v in demos.obs.items()}, policy.device)
            )
            dist = cast(Any, policy.get_distribution(obs, action_masks=demos.masks[sl]))
            preds.append(dist.distribution.probs.argmax(-1).numpy())
    return np.concatenate(preds)


def pretrain_critic(
    model: MaskablePPO,
    env: CriusEnv,
    episodes: int,
    epochs: int,
    gamma: float,
    seed: int = 0,
    batch_size: int = 256,
    learning_rate: float = 1e-3,
) -> dict[str, float]:
    """Regress the value head on the discounted returns of the policy's own rollouts.

    The policy samples its actions as PPO will (stochastic, masked) on ``episodes`` training
    episodes of ``env``; only the value loss is minimised (its own Adam optimizer).

    Returns:
        The value loss before and after, the returns' variance, and the transitions used.
    """
    policy = model.policy
    obs_rows: list[dict[str, np.ndarray]] = []
    rets: list[float] = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=seed + 10_000 + ep)
        rewards: list[float] = []
        rows: list[dict[str, np.ndarray]] = []
        while True:
            mask = env.action_masks()
            action, _ = model.predict(obs, action_masks=mask, deterministic=False)
            rows.append(obs)
            obs, reward, term, trunc, _ = env.step(int(action))
            rewards.append(float(reward))
            if term or trunc:
                break
        obs_rows += rows
        rets += discounted_returns(rewards, gamma)
    n = len(rets)
    target_all = np.array(rets, dtype=np.float32)
    stacked = {k: np.stack([o[k] for o in obs_rows]) for k in obs_rows[0]}
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    rng = np.random.default_rng(seed)

    def value_loss(idx: np.ndarray) -> torch.Tensor:
        obs_t = cast(
            torch.Tensor, obs_as_tensor({k: v[idx] for k, v in stacked.items()}, policy.device)
        )
        values = policy.predict_values(obs_t).flatten()
        return torch.nn.functional.mse_loss(values, torch.as_tensor(target_all[idx]))

    with torch.no_grad():
        before = float(value_loss(np.arange(n)))
    policy.set_training_mode(True)
    for _ in range(epochs):
        order = rng.permutation(n)
        for start in range(0, n, batch_size):
            loss = value_loss(order[start : start + batch_size])
            optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            optimizer.step()
    policy.set_training_mode(False)
    with torch.no_grad():
        after = float(value_loss(np.arange(n)))
    return {
        "critic_loss_before": before,
        "critic_loss_after": after,
        "critic_return_var": float(target_all.var()),
        "critic_transitions": float(n),
    }


def regret_weights(regrets: np.ndarray, floor: float = 0.1, cap: float = 10.0) -> np.ndarray:
    """Cross-entropy weights from per-decision regrets: mean 1, between ``floor`` and ``cap``.

    A decision whose candidates all cost about the same teaches little (its label is nearly
    arbitrary); one where a wrong choice is dear teaches much. Regrets are scaled to mean 1,
    then clipped so that no decision is ignored (``floor``) or dominates (``cap``). NaN
    regrets (not recorded) count as the mean.
    """
    r = np.where(np.isfinite(regrets), regrets, np.nan)
    mean = float(np.nanmean(r)) if np.isfinite(r).any() else 0.0
    if not mean > 0:
        return np.ones(len(regrets))
    w = np.where(np.isfinite(r), r / mean, 1.0)
    return np.clip(w, floor, cap)


def soft_targets(costs: np.ndarray, actions: np.ndarray, temperature: float) -> np.ndarray:
    """Target distributions over actions from the teacher's rollout costs.

    An action whose rollout costs a fraction ``x`` more than the cheapest gets weight
    ``exp(-x / temperature)``, so near-ties share the probability that a hard label would give
    to whichever of them the rollouts' noise put first (AlphaZero trains on visit
    distributions for the same reason). Decisions where the teacher compared fewer than two
    actions, or whose cheapest cost is not positive, keep their hard label.

    Args:
        costs: (N, A) rollout costs, NaN where an action was not compared.
        actions: (N,) the hard labels.
        temperature: relative cost difference that divides the weight by e (> 0).

    Returns:
        (N, A) float32 rows summing to 1.
    """
    if not temperature > 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    n = len(actions)
    out = np.zeros(costs.shape, dtype=np.float32)
    out[np.arange(n), actions] = 1.0
    finite = np.isfinite(costs)
    best = np.where(finite, costs, np.inf).min(axis=1)
    soft = (finite.sum(axis=1) >= 2) & (best > 0) & np.isfinite(best)
    if soft.any():
        rel = (costs[soft] - best[soft, None]) / best[soft, None]
        w = np.where(finite[soft], np.exp(-np.nan_to_num(rel, nan=np.inf) / temperature), 0.0)
        out[soft] = w / w.sum(axis=1, keepdims=True)
    return out


def teacher_regret(
    model: MaskablePPO, demos: Demonstrations, batch_size: int = 512
) -> tuple[float, float]:
    """What the policy's most likely action costs by the teacher's own rollouts.

    Returns:
        (mean relative cost of the policy's action above the cheapest compared action, over the
        decisions where the teacher compared it; share of decisions with recorded costs where
        the policy chose an action the teacher did not compare). NaNs without recorded costs.
    """
    if demos.costs is None or len(demos) == 0:
        return float("nan"), float("nan")
    pred = greedy_actions(model, demos, batch_size)
    recorded = np.isfinite(demos.costs).any(axis=1)
    if not recorded.any():
        return float("nan"), float("nan")
    costs = demos.costs[recorded]
    chosen = costs[np.arange(len(costs)), pred[recorded]]
    best = np.nanmin(costs, axis=1)
    known = np.isfinite(chosen) & (best > 0)
    regret = float(np.mean((chosen[known] - best[known]) / best[known])) if known.any() else 0.0
    return regret, float(np.mean(~np.isfinite(chosen)))


def behaviour_clone(
    model: MaskablePPO,
    demos: Demonstrations,
    epochs: int,
    batch_size: int = 256,
    seed: int = 0,
    learning_rate: float = 1e-3,
    value_coef: float = 0.5,
    weights: np.ndarray | None = None,
    targets: np.ndarray | None = None,
) -> dict[str, float]:
    """Train the policy on demonstrations (masked cross-entropy + value regression).

    Uses its own Adam optimizer at ``learning_rate``: PPO's fine-tuning rate is far too small
    for supervised learning (at 1e-4, 30 epochs reach 59% accuracy on hetero-64; at 1e-3, 73%),
    and PPO's optimizer state stays untouched. ``value_coef`` weighs the value regression
    (0: the actor alone; unscaled returns of long episodes are large enough for the value
    term to swamp the cross-entropy under gradient clipping, and the heads share layers).
    ``weights`` (one per decision, None: all equal) weigh each decision's cross-entropy, e.g.
    by what a wrong choice costs there (:func:`regret_weights`). ``targets`` ((N, A) rows
    summing to 1, None: the hard labels) replace each label by a distribution over actions
    (:func:`soft_targets`); the accuracy still counts the hard labels.

    Returns:
        Final-epoch mean loss, the accuracy of the argmax action, and the value loss.
    """
    policy = model.policy
    policy.set_training_mode(True)
    rng = np.random.default_rng(seed)
    optimizer = torch.optim.Adam(policy.parameters(), lr=learning_rate)
    n = len(demos)
    stats = {"bc_loss": float("nan"), "bc_accuracy": float("nan"), "bc_value_loss": float("nan")}
    if n == 0:
        return stats
    for _ in range(epochs):
        order = rng.permutation(n)
        losses, accs, vlosses = [], [], []
        for start in range(0, n, batch_size):
            idx = order[start : start + batch_size]
            batch = {k: v[idx] for k, v in demos.obs.items()}
            obs = cast(torch.Tensor, obs_as_tensor(batch, policy.device))
            acts = torch.as_tensor(demos.actions[idx], device=policy.device)
            masks = torch.as_tensor(demos.masks[idx], device=policy.device)
            values, log_prob, _ = policy.evaluate_actions(obs, acts, action_masks=masks)
            target = torch.as_tensor(demos.returns[idx], device=policy.device)
            value_loss = torch.nn.functional.mse_loss(values.flatten(), target)
            if targets is not None:
                # Cross-entropy against the whole target row; masked logits are finite
                # (MaskableCategorical fills them with -1e8) and their targets are zero.
                dist = cast(Any, policy.get_distribution(obs, action_masks=masks.numpy()))
                logp = torch.log_softmax(dist.distribution.logits, dim=-1)
                goal = torch.as_tensor(targets[idx], dtype=logp.dtype, device=policy.device)
                log_prob = (goal * logp).sum(dim=-1)
            if weights is None:
                actor_loss = -log_prob.mean()
            else:
                w = torch.as_tensor(weights[idx], dtype=log_prob.dtype, device=policy.device)
                actor_loss = -(w * log_prob).sum() / w.sum().clamp_min(1e-12)
            loss = actor_loss + value_coef * value_loss
            optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
            optimizer.step()
            with torch.no_grad():
                dist = cast(Any, policy.get_distribution(obs, action_masks=masks.numpy()))
                pred = dist.distribution.probs.argmax(-1)
            losses.append(float(loss.detach()))
            vlosses.append(float(value_loss.detach()))
            accs.append(float((pred == acts).float().mean()))
        stats = {
            "bc_loss": float(np.mean(losses)),
            "bc_accuracy": float(np.mean(accs)),
            "bc_value_loss": float(np.mean(vlosses)),
        }
    policy.set_training_mode(False)
    return stats
