"""Environment settings (a frozen dataclass, validated on construction)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from crius_gym.errors import ConfigError
from crius_gym.sim.actions import TuningMode


@dataclass(frozen=True)
class EnvConfig:
    """Settings of :class:`crius_gym.env.cluster_env.CriusEnv`.

    Attributes:
        window_jobs: K, waiting jobs shown to the agent.
        cells_per_job: C, candidate Cells per job, taken from the tuner's pruned list.
        cell_selection: which C of the tuner's Cells a running job shows (its moves):
            ``fastest`` (the top C by estimated throughput — mostly the biggest Cells) or
            ``spread`` (the fastest Cell at each GPU count, smallest first, then the fastest of
            each GPU type not yet shown, then the rest by throughput), so the agent can shrink
            a job or move it to another type.
        window_cell_selection: the same choice for waiting jobs (their starts). ``fastest``
            by default: with ``spread`` the Crius heuristic's starts, mostly on its best Cells,
            are less often expressible, and on ``hetero-64`` the behaviour-cloned policy starts
            at 1.23–1.43× Crius's validation JCT instead of 1.02–1.11× (docs/env.md, v2).
        head_jobs: the window holds the first ``head_jobs`` waiting jobs in arrival order, then
            fills with the earliest later jobs that have a fitting Cell (a split window, so a
            blocked head never hides runnable jobs).
        max_gpu_types: per-GPU-type features are padded to this many types.
        reconfigure: also act on running jobs: reconfigure one of the first ``running_jobs``
            running jobs to one of its top-C Cells (shrink, grow, change type), or preempt it.
        running_jobs: R, running jobs shown when ``reconfigure`` is on.
        changes_per_instant: how many times one job may be started, moved or preempted at one
            instant (before time moves). 1, as Crius does and as env v4 always did; more lets
            the agent revise a change before time passes (start a job, then move it once the
            rest of the instant is known), which the lookahead scheduler does at about 45% of
            the states where its choice is no env action under 1 (docs/rl.md, "What the
            labels can reach"). The count bounds the changes of one instant, so no policy can
            change a job forever without time moving; a later change never puts a job back on
            the Cell it held when the instant began (:mod:`crius_gym.env.instant`).
        reward: ``jct`` (−jobs in system × Δt / scale; sums to −ΣJCT/scale) or ``throughput``
            (Σ normalised progress of jobs: each job contributes its completed fraction).
        reward_scale_s: seconds per unit of the JCT reward (None: 10 × the scenario's mean
            synthetic inter-arrival gap).
        max_decisions: episode truncation guard (agent decisions).
        tuning: tuning mode of the agent's starts and reconfigurations.
        stop_at_every_event: consult the agent at every simulator decision point (even when
            WAIT is the only valid action), and let only WAIT advance time. Off for training;
            on to drive the env with a rule-based policy exactly as the simulator would
            (parity tests, imitation).
        guide: a rule-based policy (default ``crius``; a registered name or a plug-in,
            ``module:Class`` or ``file.py:Class``, as :mod:`crius_gym.plugins` reads it) whose
            plan the env makes
            expressible: the jobs it would start, move or preempt are shown first, with the
            Cells it would use (``crius_gym.env.guide``); None: no guide (the window is the
            queue's head and the jobs that can start now).
        guide_hint: show the guide's plan in the observation (``guide_*`` features: its next
            action and the Cells it plans). Off: the guide still decides which jobs and Cells
            are shown, in arrival and rank order, but nothing marks its choice. Ignored without
            a guide.
        episode_jobs: jobs per training episode (None: the scenario's ``train_episode_jobs``;
            a mixture's components keep their own proportions: each is scaled by
            ``episode_jobs`` / the mixture's ``train_episode_jobs``).
        warmup_jobs: training episodes start in mid-run: this many earlier jobs of the same
            synthetic trace are scheduled by the guide first, and the agent takes over at the
            arrival of the next one (scaled per mixture component like ``episode_jobs``). The
            agent then meets the backlog and the crowded cluster a long trace builds, which
            short episodes from an empty cluster never show; 0: episodes start empty. Held-out
            traces are never warmed up. Needs a guide.
        warmup_random: draw each training episode's warm-up uniformly from 0 to
            ``warmup_jobs`` jobs (the env's RNG), so the agent takes over at random points of
            the run, from an empty cluster to a crowded one.
        warmup_noise: the largest share of the warm-up's decisions taken as WAIT instead of
            the guide's action (each episode draws its share uniformly from 0 to this, with
            the env's RNG). The warm-up then leaves the queues and idle GPUs that a policy's
            own mistakes build, and the agent learns from those states too: noise injection
            against compounding errors in imitation (DART, Laskey et al., CoRL 2017). 0: the
            guide alone warms up.
        scale_free: observe a cluster of any size as the clusters of training look: durations
            on a fixed one-hour scale (not the scenario's reward scale, which follows its
            arrival rate and so its size: 3,000 to 400,000 s across the shipped scenarios),
            waiting and running jobs counted per 64 GPUs, the time-scale feature as the mean
            arrival gap per 64 GPUs, and no count of the arrivals still to come (which reads
            the trace's future). Off: the v3 features, which saved policies were trained on.
        reward_baseline: ``none`` or ``guide``: subtract the guide's own reward on the same
            trace over the same simulated interval (its run is computed once per episode), so
            the reward measures the agent against the guide and the arrivals' share of it
            cancels; over a whole episode it sums to −(ΣJCT − ΣJCT_guide) / scale.
    """

    window_jobs: int = 8
    cells_per_job: int = 6
    cell_selection: Literal["fastest", "spread"] = "spread"
    window_cell_selection: Literal["fastest", "spread"] = "fastest"
    head_jobs: int = 4
    max_gpu_types: int = 8
    reconfigure: bool = True
    running_jobs: int = 8
    changes_per_instant: int = 1
    reward: Literal["jct", "throughput"] = "jct"
    reward_scale_s: float | None = None
    max_decisions: int = 20_000
    tuning: TuningMode = "pruned"
    stop_at_every_event: bool = False
    guide: str | None = "crius"
    guide_hint: bool = True
    episode_jobs: int | None = None
    warmup_jobs: int = 0
    warmup_random: bool = False
    warmup_noise: float = 0.0
    scale_free: bool = False
    reward_baseline: Literal["none", "guide"] = "none"

    def __post_init__(self) -> None:
        if self.window_jobs < 1 or self.cells_per_job < 1 or self.running_jobs < 1:
            raise ConfigError("env: window_jobs, cells_per_job and running_jobs must be >= 1")
        if self.changes_per_instant < 1:
            raise ConfigError("env: changes_per_instant must be >= 1")
        if not 0 <= self.head_jobs <= self.window_jobs:
            raise ConfigError("env: head_jobs must be in [0, window_jobs]")
        if self.max_gpu_types < 1:
            raise ConfigError("env: max_gpu_types must be >= 1")
        if self.reward not in ("jct", "throughput"):
            raise ConfigError("env: reward must be 'jct' or 'throughput'")
        if self.reward_scale_s is not None and self.reward_scale_s <= 0:
            raise ConfigError("env: reward_scale_s must be > 0")
        if self.max_decisions < 1:
            raise ConfigError("env: max_decisions must be >= 1")
        for name in ("cell_selection", "window_cell_selection"):
            if getattr(self, name) not in ("fastest", "spread"):
                raise ConfigError(f"env: {name} must be fastest or spread")
        if self.tuning not in ("pruned", "full", "none"):
            raise ConfigError("env: tuning must be pruned, full or none")
        if self.episode_jobs is not None and self.episode_jobs < 1:
            raise ConfigError("env: episode_jobs must be >= 1 or null")
        if self.warmup_jobs < 0:
            raise ConfigError("env: warmup_jobs must be >= 0")
        if self.warmup_random and not self.warmup_jobs:
            raise ConfigError("env: warmup_random needs warmup_jobs > 0 (the longest warm-up)")
        if not 0.0 <= self.warmup_noise <= 1.0:  # also refuses NaN
            raise ConfigError("env: warmup_noise must be in [0, 1]")
        if self.warmup_noise and not self.warmup_jobs:
            raise ConfigError("env: warmup_noise needs warmup_jobs > 0 (it perturbs the warm-up)")
        if self.warmup_jobs and self.guide is None:
            raise ConfigError("env: warmup_jobs needs a guide (it schedules the warm-up)")
        if self.reward_baseline not in ("none", "guide"):
            raise ConfigError("env: reward_baseline must be none or guide")
        if self.reward_baseline == "guide" and (self.guide is None or self.reward != "jct"):
            raise ConfigError("env: reward_baseline guide needs a guide and the jct reward")

    @property
    def start_actions(self) -> int:
        """K·C."""
        return self.window_jobs * self.cells_per_job

    @property
    def running_actions(self) -> int:
        """R·(C + 1) when reconfiguring (C Cells + preempt per running job), else 0."""
        return self.running_jobs * (self.cells_per_job + 1) if self.reconfigure else 0

    @property
    def num_actions(self) -> int:
        """Size of the flat Discrete action space (the last action is WAIT)."""
        return self.start_actions + self.running_actions + 1

    def action_kind(self, action: int) -> str:
        """What an env action does: ``start``, ``reconfigure``, ``preempt`` or ``wait``."""
        if not 0 <= action < self.num_actions:
            raise ConfigError(f"action {action} outside [0, {self.num_actions})")
        if action == self.num_actions - 1:
            return "wait"
        if action < self.start_actions:
            return "start"
        j = (action - self.start_actions) % (self.cells_per_job + 1)
        return "preempt" if j == self.cells_per_job else "reconfigure"
