"""Warm start: behaviour cloning of a rule-based policy (the Crius heuristic) through the env.

The heuristic runs through an env with ``stop_at_every_event`` (see
:class:`~crius_gym.rl.agent.HeuristicDriver`); every decision where the agent would have had a
choice becomes a labelled example (observation, mask, the heuristic's env action — WAIT when it
chose to start nothing more). Decisions the action space cannot express carry no label and are
skipped. The policy is then trained by masked cross-entropy, and its value head regresses the
discounted return of the expert episodes, so PPO starts from heuristic quality with a matching
critic (DL2's supervised warm-up, ``notes/rl-ecosystem.md`` §4.3).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import torch
from sb3_contrib import MaskablePPO
from stable_baselines3.common.utils import obs_as_tensor

from crius_gym.env.cluster_env import CriusEnv
from crius_gym.policies.registry import make_policy
from crius_gym.rl.agent import HeuristicDriver


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
    """

    obs: dict[str, np.ndarray]
    masks: np.ndarray
    actions: np.ndarray
    returns: np.ndarray
    episodes: int
    skipped: int

    def __len__(self) -> int:
        return len(self.actions)


def collect_demonstrations(
    env: CriusEnv, expert: str, episodes: int, gamma: float, seed: int = 0
) -> Demonstrations:
    """Run the expert on ``episodes`` training episodes of the env's scenario."""
    demo_env = CriusEnv(
        env.scenario, dataclasses.replace(env.config, stop_at_every_event=True), tuner=env.tuner
    )
    wait = demo_env.config.num_actions - 1
    obs_rows: list[dict[str, np.ndarray]] = []
    masks, actions, returns = [], [], []
    skipped = 0
    for ep in range(episodes):
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
            demo_env, observe=observe, reset_seed=seed + ep
        )
        g, rets = 0.0, []
        for r in reversed(rewards):
            g = r + gamma * g
            rets.append(g)
        rets.reverse()
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
        episodes,
        skipped,
    )


def behaviour_clone(
    model: MaskablePPO,
    demos: Demonstrations,
    epochs: int,
    batch_size: int = 256,
    seed: int = 0,
    learning_rate: float = 1e-3,
) -> dict[str, float]:
    """Train the policy on demonstrations (masked cross-entropy + value regression).

    Uses its own Adam optimizer at ``learning_rate``: PPO's fine-tuning rate is far too small
    for supervised learning (at 1e-4, 30 epochs reach 59% accuracy on hetero-64; at 1e-3, 73%),
    and PPO's optimizer state stays untouched.

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
            loss = -log_prob.mean() + 0.5 * value_loss
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
