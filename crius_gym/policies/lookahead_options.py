"""Settings of :class:`~crius_gym.policies.lookahead.LookaheadPolicy`, checked on construction."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from crius_gym.errors import ConfigError


@dataclass(frozen=True)
class LookaheadOptions:
    """Settings of :class:`LookaheadPolicy`.

    Attributes:
        base: the rollout policy (a registered name): it proposes the first candidate and
            decides everything after a candidate in each rollout.
        head_jobs: waiting jobs (in queue order, besides the base's) tried on their best Cell.
        cells_per_job: Cells tried for the base's job (its top-ranked Cells that fit now).
        other_cells: Cells tried for each other waiting job.
        running_jobs: running jobs (oldest first) tried on other Cells (a move or resize).
        moves_when_idle: try those moves at every decision (True), or only while jobs wait
            (False: cheaper on large clusters, where most instants have an empty queue, but on
            hetero-64 it cost 3 points of JCT; docs/lookahead.md).
        horizon_events: truncate a rollout after this many decision points (None: no limit).
        horizon_s: truncate a rollout after this many simulated seconds (None: no limit).
        screen_s: a first, shorter horizon (simulated seconds; successive halving): every
            candidate's rollout stops there and is valued by ``tail``, and only the first
            candidate (the rollout policy's own action, else waiting) and the ``screen_keep``
            cheapest others go on to the horizon; a candidate left behind counts as infinitely
            costly unless its rollout already ended (None, the default: no screen).
        screen_keep: candidates besides the first that go on past ``screen_s``.
        tail: how a truncated rollout values the rest: ``upgrade`` (default: a list schedule
            of the waiting jobs on the GPUs as they free up, and Crius's upgrades of running
            jobs onto the GPUs left idle,
            :func:`~crius_gym.policies.rollout_tails.upgrade_schedule_tail`), ``list`` (the
            list schedule alone: nobody moves) or ``speed`` (the remaining work at current
            speeds, a waiting job as if started at once: no queueing).
        tail_cells: Cells per waiting job the list schedule tries, in the tuner's rank order.
        drain_queue: the horizon is a minimum: a rollout past it goes on until no job waits,
            so the tail values running jobs only (their rest at current speeds is nearly exact).
        max_steps: at most this many actions per instant are chosen by lookahead; after that
            the base's plan is followed.
        margin: relative cost improvement another candidate needs to replace the base's action.
        estimated: roll out with the estimator's speeds (the scheduler's view; default) rather
            than the ground truth (an oracle, for measuring only).
        queue_weight: extra cost per second each present job waits in a rollout (and in a
            list tail), on top of its time in the system: a stand-in for the arrivals the
            rollout cannot see, which would queue behind it (0: none; docs/lookahead.md).
        wait_when_queued: waiting is a candidate while jobs wait and the rollout policy acts
            (True), or not (False, the default: the lookahead may pick another action, but not
            hold back the rollout policy's admissions, which a rollout over the present jobs
            overvalues: it gives the GPUs that free up to the queue, not to arrivals;
            docs/lookahead.md).
        capacity_price: the price of GPU time, for the arrivals the rollout cannot see: a
            rollout also costs ``capacity_price × N / G`` job-seconds per GPU-second the present
            jobs hold (in the rollout and its tail), N the jobs present at the decision and G
            the cluster's GPUs: if the future is like the present, about N jobs will share the
            G GPUs, and each GPU-second taken now delays each of them by about 1/G seconds
            (0: the future is free; docs/lookahead.md).
    """

    base: str = "crius"
    head_jobs: int = 2
    cells_per_job: int = 3
    other_cells: int = 1
    running_jobs: int = 0
    moves_when_idle: bool = True
    horizon_events: int | None = None
    horizon_s: float | None = None
    screen_s: float | None = None
    screen_keep: int = 2
    tail: Literal["list", "speed", "upgrade"] = "upgrade"
    tail_cells: int = 3
    drain_queue: bool = False
    max_steps: int = 32
    margin: float = 0.0
    estimated: bool = True
    queue_weight: float = 0.0
    capacity_price: float = 0.0
    wait_when_queued: bool = False

    def __post_init__(self) -> None:
        if self.head_jobs < 0 or self.cells_per_job < 1 or self.max_steps < 1:
            raise ConfigError("head_jobs >= 0, cells_per_job >= 1 and max_steps >= 1")
        if self.horizon_events is not None and self.horizon_events < 1:
            raise ConfigError(f"horizon_events must be >= 1, got {self.horizon_events}")
        if self.horizon_s is not None and not self.horizon_s > 0:
            raise ConfigError(f"horizon_s must be > 0, got {self.horizon_s}")
        if self.screen_s is not None and not (
            self.screen_s > 0 and (self.horizon_s is None or self.screen_s < self.horizon_s)
        ):
            raise ConfigError(
                f"screen_s must be > 0 and below horizon_s ({self.horizon_s}), got {self.screen_s}"
            )
        if self.screen_keep < 1:
            raise ConfigError(f"screen_keep must be >= 1, got {self.screen_keep}")
        if not 0 <= self.margin < 1:
            raise ConfigError(f"margin must be in [0, 1), got {self.margin}")
        if self.tail not in ("list", "speed", "upgrade"):
            raise ConfigError(f"tail must be list, speed or upgrade, got {self.tail!r}")
        if self.tail_cells < 1:
            raise ConfigError(f"tail_cells must be >= 1, got {self.tail_cells}")
        if not self.queue_weight >= 0:
            raise ConfigError(f"queue_weight must be >= 0, got {self.queue_weight}")
        if not self.capacity_price >= 0:
            raise ConfigError(f"capacity_price must be >= 0, got {self.capacity_price}")
