"""The Crius heuristic's options and its public views of the FIFO bookkeeping.

Part of :mod:`crius_gym.policies.crius` (its docstring has the algorithm).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

from crius_gym.errors import ConfigError
from crius_gym.sim.snapshot import Snapshot

# Two plans whose summed throughputs differ by less than this (samples/s) are a tie, so the
# plan found first (fewer steps, earlier in the deterministic search order) wins.
TIE_SAMPLES_S = 1e-9
# Bounds that skip downgrade-search states must clear the best plan by this much more, far above
# floating-point rounding of sums of throughputs, so that skipping never changes the plan.
BOUND_SLACK_SAMPLES_S = 1e-6


@dataclass(frozen=True)
class CriusOptions:
    """Switches and bounds of the Crius heuristic.

    Attributes:
        scaling: change GPU counts (shrink in the downgrade search, grow in the upgrade pass);
            off = ``crius-ns``.
        type_change: move jobs to another GPU type (HTC); off = ``crius-nh``.
        opportunistic: backfill later jobs past a blocked one and preempt them for it; off =
            ``crius-no`` (strict FIFO).
        data_parallel_only: decide from data-parallel speeds and run data-parallel Cells (one
            stage, no tensor parallelism); on = ``crius-dp``.
        tuner_cells: use only the tuner's pruned Cells (its candidate list for the job): a Cell
            the tuner dropped as dominated (more GPUs, not ``dominance_threshold`` faster than a
            smaller Cell of its type) is never a start, grow or move target, and a request that
            only such a Cell could serve starts on the smaller Cell that dominates it. Off:
            every feasible uniform layout of a (type, count), as the authors' scheduler, which
            prices any profiled configuration (``crius-artifact``). Ignored by ``crius-dp``.
        search_depth: downgrade-search steps while at most ``busy_threshold_jobs`` jobs hold
            GPUs (authors' simulator: 3).
        search_depth_busy: steps beyond that threshold (authors: 2).
        busy_threshold_jobs: active-job count above which ``search_depth_busy`` applies.
        max_searches: downgrade searches per decision (the rest of the queue is only tried on
            idle GPUs); bounds the decision time.
        max_search_nodes: search states expanded per downgrade search.
        max_blocker_trials: blocker placements tried per decision (authors: 100).
        max_upgrade_moves: upgrade moves per decision (authors: 10).
        upgrade_on_arrivals: also run the upgrade pass at decisions with arrivals (the authors
            call it after admitting new jobs too); off = only on departures.
        upgrade_min_gain: an upgrade move must raise the summed throughput by more than this,
            samples/s.
        charge_pause: an upgrade move must also pay back its pause (tuning overhead plus
            checkpoint restore) within the job's remaining work, so nearly finished jobs stay.
        admit_requires_gain: a downgrade plan must raise the summed throughput (the new job's
            speed plus the change of the jobs it shrinks or moves must be positive).
    """

    scaling: bool = True
    type_change: bool = True
    opportunistic: bool = True
    data_parallel_only: bool = False
    tuner_cells: bool = True
    search_depth: int = 3
    search_depth_busy: int = 2
    busy_threshold_jobs: int = 150
    max_searches: int = 4
    max_search_nodes: int = 48
    max_blocker_trials: int = 100
    max_upgrade_moves: int = 10
    upgrade_on_arrivals: bool = False
    upgrade_min_gain: float = 0.0
    charge_pause: bool = True
    admit_requires_gain: bool = True

    def __post_init__(self) -> None:
        for name in (
            "search_depth",
            "search_depth_busy",
            "busy_threshold_jobs",
            "max_searches",
            "max_search_nodes",
            "max_blocker_trials",
            "max_upgrade_moves",
        ):
            if getattr(self, name) < 0:
                raise ConfigError(f"crius.{name} must be >= 0")
        if self.upgrade_min_gain < 0:
            raise ConfigError("crius.upgrade_min_gain must be >= 0")


# Public views of the FIFO bookkeeping


def blocker_jobs(snapshot: Snapshot) -> tuple[int, ...]:
    """Trace indices of waiting jobs that a later-arrived active job has overtaken."""
    if not snapshot.active:
        return ()
    last = max(v.index for v in snapshot.active)
    waiting = snapshot.waiting.indices  # sorted: the overtaken prefix, found by bisection
    return tuple(waiting[: bisect.bisect_left(waiting, last)])


def opportunistic_jobs(snapshot: Snapshot) -> tuple[int, ...]:
    """Trace indices of active jobs that hold GPUs while an earlier-arrived job waits."""
    if not snapshot.waiting:
        return ()
    first = snapshot.waiting[0].index
    return tuple(v.index for v in snapshot.active if v.index > first)
