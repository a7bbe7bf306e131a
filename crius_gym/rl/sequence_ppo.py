"""MaskablePPO with an input-dependent baseline: several rollouts of the same job sequence.

A scheduler's return depends mostly on the arrivals, which no action changes: a busy trace costs
more JCT than a quiet one whatever the policy does. Decima (Mao et al., SIGCOMM'19; "Variance
reduction for RL in input-driven environments", ICLR'19) removes that part of the variance with
a baseline that conditions on the input sequence: run several rollouts of the *same* arrivals
and compare each with their mean at the same point of simulated time. spark-sched-sim uses 4
sequences × 4 rollouts per update (github.com/ArchieGertsman/spark-sched-sim).

:class:`SequencePPO` does that inside SB3's update loop. With ``sequences`` > 0, one rollout phase
is one whole episode per env: the ``n_envs`` envs form ``sequences`` groups of
``n_envs / sequences`` rollouts, every env of a group replays the same training trace (drawn
from the model's own seeded generator), and each transition's advantage is its return-to-go
minus the mean, over the group's rollouts, of the return-to-go at the same simulated time
(piecewise linear between their decision times). The PPO loss, clipping and epochs are SB3's
own; the value head is still trained on the returns (for logging), but advantages do not use it.
With ``sequences`` = 0 it is MaskablePPO unchanged (GAE on the value function).

**Vine advantages** (``vine_fraction`` > 0; TRPO's "vine" estimation, Schulman et al. 2015 §5.2,
with the guide as the rollout policy). The simulator is deterministic and the env can tell what
any action would cost if the guide took over afterwards
(:meth:`~crius_gym.env.cluster_env.CriusEnv.rollout_cost`). At a share ``vine_fraction`` of the
decisions of each episode (sampled from the current policy), the update evaluates the action
taken, the guide's action and ``vine_actions`` other valid actions, and each becomes a sample
whose advantage is its exact gain over the guide's action, −(ΔΣJCT) / reward scale. The greedy
policy of these advantages is Bertsekas' rollout policy of the guide, which improves on it by
construction; PPO's clipped surrogate moves the network towards it one update at a time. Every
evaluated action is a sample of its own (a uniform proposal, not the policy's: rare good
actions get the push they need), which biases the gradient towards the rollout policy's choices
rather than the policy gradient's; the advantages are exact for the guide's value, not the
current policy's (one step of approximate policy iteration per update, as in API/rollout
learning, Lagoudakis & Parr 2003).

Because these advantages are the guide's, not the current policy's, they never go stale: with
``vine_distill_epochs`` > 0 every evaluated decision is also kept (up to ``vine_replay``
decisions) with its label — the best action evaluated, when it beats the guide's by more than
``vine_margin``, else the guide's — and after each PPO update the policy takes that many epochs
of cross-entropy on the whole replay, with its own Adam optimizer at ``vine_lr``: it learns to
imitate the rollout policy ("RL as classification", approximate policy iteration).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib import MaskablePPO
from sb3_contrib.common.maskable.buffers import MaskableDictRolloutBuffer
from stable_baselines3.common.buffers import RolloutBuffer
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.utils import obs_as_tensor
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv
from torch.distributions import Distribution

from crius_gym.errors import ConfigError
from crius_gym.rl import training_state
from crius_gym.rl.replay import LabelReplay
from crius_gym.rl.rollout_pool import RolloutPool, network_rollouts


def sequence_advantages(
    groups: list[list[tuple[np.ndarray, np.ndarray, float]]], gamma: float
) -> tuple[list[list[np.ndarray]], list[list[np.ndarray]]]:
    """Returns-to-go and advantages against the per-sequence baseline.

    Args:
        groups: per sequence, per rollout: (rewards (T,), decision times (T,), end time).
        gamma: discount per decision.

    Returns:
        (returns, advantages), shaped like ``groups`` with one (T,) array per rollout.
    """
    all_returns: list[list[np.ndarray]] = []
    all_adv: list[list[np.ndarray]] = []
    for rollouts in groups:
        rets = []
        for rewards, _, _ in rollouts:
            g = np.zeros(len(rewards))
            acc = 0.0
            for t in range(len(rewards) - 1, -1, -1):
                acc = rewards[t] + gamma * acc
                g[t] = acc
            rets.append(g)
        curves = [
            (np.append(times, end), np.append(g, 0.0))
            for (_, times, end), g in zip(rollouts, rets, strict=True)
        ]
        advs = []
        for (_, times, _), g in zip(rollouts, rets, strict=True):
            base = np.mean(
                [np.interp(times, xs, ys, left=ys[0], right=0.0) for xs, ys in curves], axis=0
            )
            advs.append(g - base)
        all_returns.append(rets)
        all_adv.append(advs)
    return all_returns, all_adv


def _vine_actions(
    cfg: Any, mask: np.ndarray, guide: int, taken: int, extra: int, rng: np.random.Generator
) -> list[int]:
    """The actions a vine evaluates at one decision.

    The guide's, the one taken, WAIT, and — when the guide would start a job — that job on each
    of its other Cells that fit (where the rollout policy's gains concentrate: which Cell, or
    whether to start at all), plus ``extra`` other valid actions drawn uniformly.
    """
    wait = cfg.num_actions - 1
    out = [guide, taken]
    if mask[wait]:
        out.append(wait)
    c = cfg.cells_per_job
    if guide < cfg.start_actions:
        row = guide // c
        out += [row * c + j for j in range(c) if mask[row * c + j]]
    chosen = set(out)
    others = [int(x) for x in np.flatnonzero(mask) if int(x) not in chosen]
    if others and extra:
        out += [int(x) for x in rng.permutation(others)[:extra]]
    return list(dict.fromkeys(out))


def _masks(env: Any) -> np.ndarray:
    """The action mask of a (wrapped) env that implements ``action_masks``."""
    return np.asarray(env.unwrapped.action_masks())


class SequencePPO(MaskablePPO):
    """MaskablePPO with the per-sequence baseline of Decima (see the module docstring).

    Args:
        sequences: job sequences per update (0: plain MaskablePPO). ``n_envs`` must be a
            multiple of it, and the env a ``DummyVecEnv`` of envs that replay training trace
            ``i`` with ``reset(options={"split": "train", "index": i})``.
        update_threads: torch threads of the update (rollouts keep the process's setting).
        vine_fraction: share of decisions whose actions are evaluated by guide rollouts (0:
            no vine; then ``sequences`` or GAE).
        vine_actions: random valid actions evaluated at such a decision besides the action
            taken and the guide's.
        vine_distill_epochs: epochs of cross-entropy on the replay of labelled decisions
            after each update (0: PPO on the vine samples only).
        vine_replay: labelled decisions kept (the oldest are dropped).
        vine_margin: an evaluated action becomes the label only if it beats the guide's by more
            than this (advantage in reward-scale units).
        vine_rel_margin: an evaluated action becomes the label only if it also lowers the
            rollout's summed time in system by more than this fraction of the guide's (so in a
            crowded state, where hundreds of jobs' times add up, a small gain keeps the guide).
        vine_lr: Adam rate of that distillation.
        vine_adv_norm: ``batch``: advantages divided by their root mean square over the
            update's samples; ``decision``: each decision's by the standard deviation of its
            evaluated actions' costs (its own scale, whatever the cluster's size).
        vine_future: rollouts include the arrivals still to come (hindsight); False: only the
            jobs already arrived (labels that are a function of the state).
        vine_rollout_policy: a saved policy (.zip) deciding after each evaluated action
            instead of the guide (expert iteration; needs ``vine_future`` False).
        vine_horizon_s: truncation of those network rollouts, simulated seconds (None: none).
        rollout_workers: worker processes (or Ray actors, with ``rollout_backend`` "ray") for
            the vine's rollouts (0: in this process); they compute while the episodes go on,
            and the costs are the same either way.
        *args, **kwargs: MaskablePPO's.
    """

    def __init__(
        self,
        *args: Any,
        sequences: int = 0,
        update_threads: int = 2,
        vine_fraction: float = 0.0,
        vine_actions: int = 3,
        vine_distill_epochs: int = 0,
        vine_distill_batches: int = 8,
        vine_replay: int = 20_000,
        vine_margin: float = 0.0,
        vine_rel_margin: float = 0.0,
        vine_lr: float = 1e-3,
        vine_adv_norm: str = "batch",
        vine_future: bool = True,
        vine_rollout_policy: str | None = None,
        vine_horizon_s: float | None = None,
        rollout_workers: int = 0,
        **kwargs: Any,
    ) -> None:
        self.sequences = sequences
        self.update_threads = update_threads
        self.vine_fraction = vine_fraction
        self.vine_actions = vine_actions
        self.vine_distill_epochs = vine_distill_epochs
        self.vine_distill_batches = vine_distill_batches
        self.vine_replay = vine_replay
        self.vine_margin = vine_margin
        self.vine_rel_margin = vine_rel_margin
        self.vine_lr = vine_lr
        self.vine_adv_norm = vine_adv_norm
        self.vine_future = vine_future
        self.vine_rollout_policy = vine_rollout_policy
        self.vine_horizon_s = vine_horizon_s
        self._network_rollouts: Any = None
        self.rollout_workers = rollout_workers
        # Where the rollouts run: an execution setting, not a hyperparameter (the numbers are
        # the same on either backend), so it is not saved with the model; train() sets it.
        self.rollout_backend = "process"
        self.ray_address: str | None = None
        self._pool: Any = None  # RolloutPool or RayRolloutPool
        self._replay = LabelReplay(max(1, vine_replay))
        # The vine's episodes go on across updates: their observations, and the evaluated
        # decisions of the last phase, whose rollouts are used at the next update.
        self._vine_obs: list[dict[str, np.ndarray]] | None = None
        self._vine_pending: list[Any] = []
        self._distill_optimizer: torch.optim.Optimizer | None = None
        self._restore: dict[str, Any] | None = None  # a captured training state to put back
        self.distill_stats: dict[str, float] = {}
        super().__init__(*args, **kwargs)
        if vine_fraction:
            if not isinstance(self.get_env(), DummyVecEnv):
                raise ConfigError("vine advantages need a DummyVecEnv")
            self.normalize_advantage = False  # scaled in _collect_vine instead
        if sequences:
            env = self.get_env()
            if not isinstance(env, DummyVecEnv) or env.num_envs % sequences:
                raise ConfigError(
                    f"sequences={sequences}: needs a DummyVecEnv whose n_envs is a multiple of it"
                )
        self._sequence_rng = np.random.default_rng(self.seed if self.seed is not None else 0)

    def _excluded_save_params(self) -> list[str]:
        # The replay and its optimizer are training state of one session, not of the policy;
        # so are the envs' last observations (32 of them, half a MB: a resumed run's envs are
        # new, and SB3's set_env resets them).
        return [
            *super()._excluded_save_params(),
            "_last_obs",
            "_replay",
            "_distill_optimizer",
            "_pool",
            "_network_rollouts",
            "_vine_obs",
            "_vine_pending",
            "_restore",
            "rollout_backend",
            "ray_address",
        ]

    def _setup_learn(
        self,
        total_timesteps: int,
        callback: Any = None,
        reset_num_timesteps: bool = True,
        tb_log_name: str = "run",
        progress_bar: bool = False,
    ) -> Any:
        """SB3's set-up; where it resets the envs, the vine's episodes start afresh too.

        A training state given to :meth:`restore_training_state` then replaces the freshly
        reset envs and everything else the run depends on.
        """
        if reset_num_timesteps or self._last_obs is None:
            self._vine_obs = None
        out = super()._setup_learn(
            total_timesteps, callback, reset_num_timesteps, tb_log_name, progress_bar
        )
        if self._restore is not None:
            state, self._restore = self._restore, None
            training_state.apply(self, state)
        return out

    def restore_training_state(self, state: dict[str, Any]) -> None:
        """Continue, at the next ``learn``, from a state of :func:`training_state.capture`.

        The model must be the checkpoint saved with it (same step), and ``learn`` must be
        called with ``reset_num_timesteps=False``.
        """
        self._restore = state

    def capture_training_state(self) -> dict[str, Any]:
        """The run's state beside the zip (:func:`training_state.capture`; a phase's start)."""
        return training_state.capture(self)

    @property
    def replay(self) -> LabelReplay:
        """The labelled decisions kept for distillation (empty before the vine's first update)."""
        return self._replay

    def close_pool(self) -> None:
        """Stop the rollout workers (also done when the model is garbage-collected)."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __del__(self) -> None:
        self.close_pool()

    def train(self) -> None:
        """SB3's update, with ``update_threads`` torch threads.

        Rollouts keep the process's setting (one thread: a one-sample forward pass is about 3x
        slower with two threads than with one on this kind of machine).
        """
        before = torch.get_num_threads()
        torch.set_num_threads(self.update_threads)
        try:
            super().train()
            if self.vine_distill_epochs and len(self._replay):
                self._distill()
        finally:
            torch.set_num_threads(before)

    def _distill(self) -> None:
        """Cross-entropy towards the rollout policy's labels, on minibatches of the replay.

        ``vine_distill_epochs`` passes over the replay, but at most ``vine_distill_batches``
        minibatches per update: early on the few labels are each seen a few times, later every
        update costs the same whatever the replay holds. Only the actor runs (the value head has
        no part in this loss).
        """
        policy = self.policy
        if self._distill_optimizer is None:
            self._distill_optimizer = torch.optim.Adam(policy.parameters(), lr=self.vine_lr)
        replay = self._replay
        n = len(replay)
        step = self.batch_size or 256
        batches = min(self.vine_distill_batches, -(-self.vine_distill_epochs * n // step))
        order = np.concatenate(
            [self._sequence_rng.permutation(n) for _ in range(-(-batches * step // n))]
        )
        policy.set_training_mode(True)
        losses, hits = [], []
        for b in range(batches):
            obs, masks, labels = replay.batch(order[b * step : (b + 1) * step])
            dist = policy.get_distribution(obs_as_tensor(obs, self.device), action_masks=masks)
            log_prob = dist.log_prob(torch.as_tensor(labels, device=self.device))
            loss = -log_prob.mean()
            self._distill_optimizer.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            torch.nn.utils.clip_grad_norm_(policy.parameters(), self.max_grad_norm)
            self._distill_optimizer.step()
            losses.append(float(loss.detach()))
            hits.append(float((log_prob.detach() > np.log(0.5)).float().mean()))
        policy.set_training_mode(False)
        self.distill_stats = {"loss": float(np.mean(losses)), "label_p>0.5": float(np.mean(hits))}
        self.logger.record("vine/distill_loss", self.distill_stats["loss"])
        self.logger.record("vine/label_prob_over_half", self.distill_stats["label_p>0.5"])
        self.logger.record("vine/replay", n)
        self.logger.record("vine/labels_not_guide", replay.share_not_guide())

    def collect_rollouts(
        self,
        env: VecEnv,
        callback: BaseCallback,
        rollout_buffer: RolloutBuffer,
        n_rollout_steps: int,
        use_masking: bool = True,
    ) -> bool:
        """One episode per env (vine, or ``sequences`` traces shared by groups of envs)."""
        if self.vine_fraction:
            return self._collect_vine(env, callback)
        if not self.sequences:
            return bool(super().collect_rollouts(env, callback, rollout_buffer, n_rollout_steps))
        assert isinstance(env, DummyVecEnv)
        self.policy.set_training_mode(False)
        n = env.num_envs
        per = n // self.sequences
        indices = self._sequence_rng.integers(0, 2**31 - 1, size=self.sequences)
        obs: list[dict[str, np.ndarray]] = []
        times: list[list[float]] = [[] for _ in range(n)]
        for i, e in enumerate(env.envs):
            o, info = e.reset(options={"split": "train", "index": int(indices[i // per])})
            obs.append(o)
            times[i].append(float(info.get("sim_time_s", 0.0)))
        steps: list[list[tuple[dict[str, np.ndarray], int, float, float, np.ndarray]]] = [
            [] for _ in range(n)
        ]
        rewards: list[list[float]] = [[] for _ in range(n)]
        active = list(range(n))
        callback.on_rollout_start()
        while active:
            tensor, masks = self._batch(env, obs, active)
            with torch.no_grad():
                actions, values, dist = self._act(tensor, masks)
                log_probs = dist.log_prob(actions)
            acts = actions.cpu().numpy()
            infos, dones, still = [], [], []
            for row, i in enumerate(active):
                a = int(acts[row])
                steps[i].append((obs[i], a, float(values[row]), float(log_probs[row]), masks[row]))
                o, r, term, trunc, info = env.envs[i].step(a)
                rewards[i].append(float(r))
                done = bool(term or trunc)
                times[i].append(float(info["sim_time_s"]))  # at the end: the episode's end
                if not done:
                    obs[i] = o
                    still.append(i)
                infos.append(info)
                dones.append(done)
            self.num_timesteps += len(active)
            callback.update_locals({"infos": infos, "dones": np.array(dones)})
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, np.array(dones))
            active = still
        groups = [
            [
                (np.array(rewards[i]), np.array(times[i][:-1]), times[i][-1])
                for i in range(g * per, (g + 1) * per)
            ]
            for g in range(self.sequences)
        ]
        returns, advantages = sequence_advantages(groups, self.gamma)
        self.rollout_buffer = self._buffer(steps, returns, advantages)  # type: ignore[assignment]
        callback.on_rollout_end()
        return True

    def _act(self, tensor: Any, masks: np.ndarray) -> tuple[torch.Tensor, torch.Tensor, Any]:
        """Sampled actions, values and the masked distribution, in one pass of the network.

        The same numbers and the same random draws as ``policy(tensor, action_masks=masks)``
        followed by ``policy.get_distribution(...)``, which would run the network twice.
        Call under ``torch.no_grad()`` (the row scorer then encodes the tables once).
        """
        p = self.policy
        features = p.extract_features(tensor)
        ext = p.mlp_extractor
        if p.share_features_extractor:
            latent_pi, latent_vf = ext(features)
        else:
            pi_features, vf_features = features
            latent_pi, latent_vf = ext.forward_actor(pi_features), ext.forward_critic(vf_features)
        values = p.value_net(latent_vf)
        # Argument validation checks logits the network just made: off here, as a distribution
        # costs two validations (built, then masked). Restored at once (torch's default is
        # process-wide).
        validate = Distribution._validate_args
        Distribution.set_default_validate_args(False)
        try:
            dist: Any = p._get_action_dist_from_latent(latent_pi)
            dist.apply_masking(masks)
        finally:
            Distribution.set_default_validate_args(validate)
        return dist.get_actions(deterministic=False), values, dist

    def _batch(
        self, env: DummyVecEnv, obs: list[dict[str, np.ndarray]], active: list[int]
    ) -> tuple[Any, np.ndarray]:
        """The active envs' observations as one tensor batch, with their action masks."""
        batch = {k: np.stack([obs[i][k] for i in active]) for k in obs[active[0]]}
        masks = np.stack([_masks(env.envs[i]) for i in active])
        return obs_as_tensor(batch, self.device), masks

    def _vine_reset(self, env: Any) -> dict[str, np.ndarray]:
        """Start a new training episode (a trace drawn with the model's generator)."""
        index = int(self._sequence_rng.integers(0, 2**31 - 1))
        o, _ = env.reset(options={"split": "train", "index": index})
        return dict(o)

    def _collect_vine(self, env: VecEnv, callback: BaseCallback) -> bool:
        """``n_steps`` decisions per env from the current policy, evaluating some by rollouts.

        Episodes go on across updates (an env whose episode ends starts the next at once), so
        every step runs the network on all ``n_envs`` observations. The rollouts of the
        decisions evaluated in this phase run in the workers while the next phase is collected;
        the update after a phase uses those of the phase before it (a fixed lag of one phase,
        so the run does not depend on how fast the workers are). Their advantages are the
        guide's, so they do not go stale; their PPO samples keep the log-probabilities of the
        policy that took them.
        """
        assert isinstance(env, DummyVecEnv)
        self.policy.set_training_mode(False)
        rng = self._sequence_rng
        n = env.num_envs
        if self._vine_obs is None:
            self._vine_obs = [self._vine_reset(e) for e in env.envs]
        obs = self._vine_obs
        fresh: list[Any] = []  # (obs, mask, log-probs, value, guide, tried, scale, costs)
        every = list(range(n))
        callback.on_rollout_start()
        for _ in range(self.n_steps):
            tensor, masks = self._batch(env, obs, every)
            with torch.no_grad():
                actions, values, dist = self._act(tensor, masks)
                # Categorical keeps normalised logits: the log-probabilities of every action.
                log_all = dist.distribution.logits.cpu().numpy()
            acts = actions.cpu().numpy()
            infos, dones = [], []
            for i in every:
                a = int(acts[i])
                if rng.random() < self.vine_fraction and np.count_nonzero(masks[i]) > 1:
                    fresh.append(self._evaluate(env.envs[i].unwrapped, obs[i], masks[i], a, rng))
                    fresh[-1][2:4] = log_all[i], float(values[i])
                o, _, term, trunc, info = env.envs[i].step(a)
                done = bool(term or trunc)
                obs[i] = self._vine_reset(env.envs[i]) if done else o
                infos.append(info)
                dones.append(done)
            self.num_timesteps += n
            callback.update_locals({"infos": infos, "dones": np.array(dones)})
            if not callback.on_step():
                return False
            self._update_info_buffer(infos, np.array(dones))
        ready, self._vine_pending = self._vine_pending, fresh
        if self._pool is not None and hasattr(self._pool, "retries"):
            self.logger.record("vine/rollout_retries", self._pool.retries)
        samples: list[tuple[dict[str, np.ndarray], int, float, float, np.ndarray]] = []
        advantages: list[float] = []
        for o, mask, logp, value, guide, tried, scale, costs in ready:
            flat = costs.result() if hasattr(costs, "result") else costs
            cost = dict(zip(tried, flat, strict=True))
            adv_scale = scale
            if self.vine_adv_norm == "decision":
                spread = float(np.std(flat))
                adv_scale = spread if spread > 0 else 1.0  # all equal: every advantage is 0
            for x in tried:
                samples.append((o, x, value, float(logp[x]), mask))
                advantages.append((cost[guide] - cost[x]) / adv_scale)
            best = min(tried, key=lambda x: (cost[x], x != guide))
            gain = (cost[guide] - cost[best]) / scale
            relative = (cost[guide] - cost[best]) / cost[guide] if cost[guide] > 0 else 0.0
            better = gain > self.vine_margin and relative > self.vine_rel_margin
            label = best if better else guide
            self._replay.append(o, mask, label, label != guide)
        if not samples:  # no decision evaluated yet: nothing to learn from this phase
            samples.append((obs[0], 0, 0.0, 0.0, np.ones_like(_masks(env.envs[0]))))
            advantages.append(0.0)
        adv = np.array(advantages, dtype=np.float32)
        # Scaled, not centred: most deviations from the guide cost JCT, so centring would make
        # the guide's own action (advantage 0) look good and every small gain look bad.
        rms = float(np.sqrt(np.mean(adv**2)))
        if rms > 0 and self.vine_adv_norm == "batch":
            adv = adv / rms
        returns = np.array([s[2] for s in samples], dtype=np.float32)  # = values: no critic target
        self.rollout_buffer = self._buffer(  # type: ignore[assignment]
            [samples], [[returns]], [[adv]]
        )
        callback.on_rollout_end()
        return True

    def _evaluate(
        self,
        cenv: Any,
        obs: dict[str, np.ndarray],
        mask: np.ndarray,
        taken: int,
        rng: np.random.Generator,
    ) -> list[Any]:
        """Start the rollouts of one decision's vine actions (in the workers, if any).

        Returns:
            [obs, mask, log-probs, value, guide, tried, reward scale, costs]; the caller fills
            the log-probs and value, ``costs`` is a list or a future whose ``result()`` gives it.
        """
        guide = cenv.guide_action()
        tried = _vine_actions(cenv.config, mask, guide, taken, self.vine_actions, rng)
        if self._pool is None and self.rollout_workers:
            scenario = cenv.scenario.path or cenv.scenario.name
            if self.rollout_backend == "ray":
                from crius_gym.rl.ray_rollouts import RayRolloutPool

                self._pool = RayRolloutPool(
                    scenario, cenv.config, self.rollout_workers, self.ray_address
                )
            else:
                self._pool = RolloutPool(scenario, cenv.config, self.rollout_workers)
        costs: Any
        if self._pool is not None:
            costs = self._pool.submit(
                cenv, tried, self.vine_future, self.vine_rollout_policy, self.vine_horizon_s
            )
        elif self.vine_rollout_policy is not None:
            if self._network_rollouts is None:
                self._network_rollouts = network_rollouts(
                    self.vine_rollout_policy, self.vine_horizon_s
                )
            costs = self._network_rollouts.costs(cenv, tried)
        else:
            costs = [cenv.rollout_cost(x, self.vine_future) for x in tried]
        return [obs, mask, None, 0.0, guide, tried, float(cenv.reward_scale_s), costs]

    def _buffer(
        self,
        steps: list[list[tuple[dict[str, np.ndarray], int, float, float, np.ndarray]]],
        returns: list[list[np.ndarray]],
        advantages: list[list[np.ndarray]],
    ) -> MaskableDictRolloutBuffer:
        """A one-column rollout buffer holding every transition with its advantage."""
        flat = [s for env_steps in steps for s in env_steps]
        ret = np.concatenate([r for group in returns for r in group])
        adv = np.concatenate([a for group in advantages for a in group])
        size = len(flat)
        assert isinstance(self.observation_space, spaces.Dict)
        buf = MaskableDictRolloutBuffer(
            size,
            self.observation_space,
            self.action_space,
            device=self.device,
            gamma=self.gamma,
            gae_lambda=self.gae_lambda,
            n_envs=1,
        )
        for key in buf.observations:
            buf.observations[key][:, 0] = np.stack([s[0][key] for s in flat]).reshape(
                buf.observations[key][:, 0].shape
            )
        buf.actions[:, 0, 0] = [s[1] for s in flat]
        buf.values[:, 0] = [s[2] for s in flat]
        buf.log_probs[:, 0] = [s[3] for s in flat]
        buf.action_masks[:, 0] = np.stack([s[4] for s in flat])
        buf.returns[:, 0] = ret
        buf.advantages[:, 0] = adv
        buf.rewards[:, 0] = 0.0
        buf.episode_starts[:, 0] = 0.0
        buf.pos = size
        buf.full = True
        return buf
