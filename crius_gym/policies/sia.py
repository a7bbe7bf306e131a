"""Sia-style elastic, heterogeneity-aware goodput allocation (Jayaram Subramanya et al., SOSP'23).

Every job may run on any configuration (GPU type, n GPUs) with n in ``gpu_counts`` (Sia's
power-of-two configurations up to 16) where its data-parallel replica fits.  At each decision an
integer program gives each job one configuration or none, maximising Sia's objective

    Σ_j [ (speedup_j(config))^p + λ ]  over allocated jobs,

where speedup is the job's data-parallel throughput on the configuration divided by its
throughput on its smallest feasible configuration, p = 0.5 is Sia's fairness exponent and λ = 1 is
Sia's penalty for leaving a job without GPUs.  For a running job every configuration other than
its current one is discounted by Sia's (Pollux's) re-allocation factor
max(age − restarts · O, 0) / (age + O), with O the restart pause (unpruned tuning plus checkpoint
restore): the share of the job's life not lost to restarts, counting the one considered, so that
jobs restarted often stay put.  Per-type GPU capacity bounds the program.  The solution is
realised node by node: preemptions, reconfigurations (shrinks first), starts in arrival order,
then a backfill of GPUs left idle by jobs that did not fit node-wise; running jobs are touched
only when their configuration changes.
See ``docs/baselines.md`` for what is simplified.
"""

from __future__ import annotations

from collections.abc import Sequence

from crius_gym.policies.assignment import assign
from crius_gym.policies.data_parallel import (
    Config,
    Launch,
    StateKey,
    dp_throughput,
    first_fitting,
    held_cell,
    launches,
    state_key,
)
from crius_gym.policies.registry import register
from crius_gym.sim.actions import Action, Preempt, Reconfigure, Reject, Start, TuningMode
from crius_gym.sim.allocator import Allocator
from crius_gym.sim.policy import PolicyContext
from crius_gym.sim.records import JobView
from crius_gym.sim.snapshot import Snapshot


def _reachable(current: Config, other: Config) -> bool:
    """Whether a running job may go from ``current`` to ``other`` in one decision.

    Any GPU count on its type, or its count on another type: changing both takes two decisions.
    This keeps a running job's options at about eight instead of twenty (running jobs dominate
    the program's size), and a move that changes both is rarely worth one restart anyway.
    """
    (t0, n0), (t, n) = current, other
    return t == t0 or n == n0


@register("sia")
class Sia:
    """Elastic goodput-maximising allocation over (GPU type, GPU count) configurations (Sia).

    Args:
        round_s: Sia's scheduling round (300 s as in the Crius artifact's simulations).  The
            program is solved at arrivals and once per round; GPUs freed by completions wait for
            the next round.  A round at which nothing happened since the last solve is skipped
            (only the jobs' ages, hence re-allocation factors, changed).  None: solve at every
            arrival and completion.
        fairness_p: Sia's exponent p on the normalised throughput (0 < p ≤ 1; smaller is fairer).
        allocation_bonus: value of giving a job any allocation (Sia's λ, the "no allocation"
            penalty).
        gpu_counts: GPU counts a configuration may have.
        max_waiting: waiting jobs (in arrival order) offered to the program, to bound its size
            (running jobs are always in it).
        auto_parallel: run the chosen layout's best plan, paying the unpruned tuning ("+AP",
            default); False runs data parallelism untuned.
    """

    name = "sia"

    def __init__(
        self,
        round_s: float | None = 300.0,
        fairness_p: float = 0.5,
        allocation_bonus: float = 1.0,
        gpu_counts: Sequence[int] = (1, 2, 4, 8, 16),
        max_waiting: int = 128,
        auto_parallel: bool = True,
    ) -> None:
        if not 0 < fairness_p <= 1:
            raise ValueError(f"sia: fairness_p={fairness_p} must be in (0, 1]")
        self.tick_interval_s = round_s
        self.fairness_p = fairness_p
        self.allocation_bonus = allocation_bonus
        self.gpu_counts = tuple(gpu_counts)
        self.max_waiting = max_waiting
        self.auto_parallel = auto_parallel
        self._speeds: dict[int, dict[Config, float]] = {}
        self._expected: StateKey | None = None  # the state our last solve left
        self._next_round_s = 0.0

    def reset(self, context: PolicyContext) -> None:
        """Forget the previous run's jobs."""
        self._speeds = {}
        self._expected = None
        self._next_round_s = 0.0

    def _config_speeds(self, snapshot: Snapshot, view: JobView) -> dict[Config, float]:
        """Data-parallel samples/s of every feasible configuration of a job (cached per job)."""
        speeds = self._speeds.get(view.index)
        if speeds is None:
            speeds = {}
            for t in snapshot.cluster.gpu_types:
                for n in self.gpu_counts:
                    thr = dp_throughput(snapshot.tuner, view.job, t, n)
                    if thr is not None:
                        speeds[(t, n)] = thr
            self._speeds[view.index] = speeds
        return speeds

    def decide(self, snapshot: Snapshot) -> Sequence[Action]:
        """Reject DP-infeasible jobs, solve the configuration program, realise it."""
        key = state_key(snapshot)
        if self._expected is not None:
            arrived = key[0] != self._expected[0]
            if key == self._expected or (not arrived and snapshot.now_s < self._next_round_s):
                return []
            if not arrived and self.tick_interval_s is not None:
                self._next_round_s = snapshot.now_s + self.tick_interval_s
        actions: list[Action] = []
        waiting: list[JobView] = []
        for view in snapshot.waiting:
            if self._config_speeds(snapshot, view):
                waiting.append(view)
            else:
                actions.append(
                    Reject(
                        view.job.job_id,
                        "no data-parallel replica fits in memory "
                        "on any GPU type and count (DP-based baseline)",
                    )
                )
        jobs = sorted(list(snapshot.active) + waiting[: self.max_waiting], key=lambda v: v.index)
        values = [self._values(snapshot, v) for v in jobs]
        assigned = self._solve(snapshot, values)
        alloc = snapshot.scratch()
        if assigned is not None:
            actions += self._realise(snapshot, alloc, jobs, values, assigned)
        self._expected = state_key(snapshot, alloc)
        return actions

    def _values(self, snapshot: Snapshot, view: JobView) -> dict[Config, float]:
        """Sia's value of each configuration of a job (restart-discounted when it runs)."""
        speeds = dict(self._config_speeds(snapshot, view))
        current: Config | None = None
        cell = held_cell(view)
        if cell is not None:
            current = (cell.gpu_type, cell.num_gpus)
            if current not in speeds:  # e.g. placed by someone else: it may stay
                speeds[current] = (
                    view.job.global_batch / view.estimated_iter_time_s
                    if view.estimated_iter_time_s > 0
                    else min(speeds.values())
                )
        base = min(speeds.values())
        factor = self._restart_factor(snapshot, view, current[1]) if current else 1.0
        out = {}
        for (t, n), thr in speeds.items():
            if current is not None and (t, n) != current:
                if not _reachable(current, (t, n)):
                    continue
                thr *= factor
            # Rounded to 0.01 as Sia does, so that noise-level gains never trigger a restart.
            out[(t, n)] = round((thr / base) ** self.fairness_p, 2) + self.allocation_bonus
        return out

    def _restart_factor(self, snapshot: Snapshot, view: JobView, num_gpus: int) -> float:
        """Sia's re-allocation factor of a running job on ``num_gpus`` GPUs (1: no discount)."""
        mode: TuningMode = "full" if self.auto_parallel else "none"
        pause_s = snapshot.tuning_overhead_s(num_gpus, mode) + snapshot.restore_s
        age_s = snapshot.now_s - view.job.arrival_s
        if age_s < pause_s:
            return 1.0  # as in Sia: a job younger than one restart is not penalised
        lost_s = (view.preemptions + view.reconfigurations) * pause_s
        return max(age_s - lost_s, 0.0) / (age_s + pause_s)

    def _solve(
        self, snapshot: Snapshot, values: list[dict[Config, float]]
    ) -> dict[int, Config] | None:
        """Chosen configuration per position in ``values`` (absent: none); None if it failed."""
        capacity = {t: snapshot.cluster.group(t).num_gpus for t in snapshot.cluster.gpu_types}
        chosen = assign(values, [False] * len(values), capacity)
        if chosen is None:
            return None
        return {k: c for k, c in enumerate(chosen) if c is not None}

    def _launch(
        self, snapshot: Snapshot, alloc: Allocator, view: JobView, config: Config
    ) -> Launch | None:
        return first_fitting(
            alloc, launches(snapshot.tuner, view.job, config[0], config[1], self.auto_parallel)
        )

    def _realise(
        self,
        snapshot: Snapshot,
        alloc: Allocator,
        jobs: list[JobView],
        values: list[dict[Config, float]],
        assigned: dict[int, Config],
    ) -> list[Action]:
        """Turn the chosen configurations into valid actions on ``alloc``."""
        actions: list[Action] = []
        changes: list[tuple[JobView, Config]] = []
        for k, view in enumerate(jobs):
            if view.placement is None:
                continue
            new = assigned.get(k)
            if new is None:
                alloc.release(view.placement)
                actions.append(Preempt(view.job.job_id))
            elif new != (view.placement.gpu_type, view.placement.num_gpus):
                changes.append((view, new))
        # Shrinks first: they free GPUs that growing or moving jobs need.
        changes.sort(
            key=lambda vc: (
                vc[1][1] - (vc[0].placement.num_gpus if vc[0].placement else 0),
                vc[0].index,
            )
        )
        progress = True
        while changes and progress:
            progress, rest = False, []
            for view, new in changes:
                assert view.placement is not None
                alloc.release(view.placement)
                launch = self._launch(snapshot, alloc, view, new)
                if launch is None:
                    alloc.take(view.placement)  # keeps its configuration for now
                    rest.append((view, new))
                    continue
                alloc.place(launch.cell)
                actions.append(
                    Reconfigure(view.job.job_id, launch.cell, launch.constraints, launch.tuning)
                )
                progress = True
            changes = rest
        # Starts in arrival order, then the backfill: each remaining waiting job's configurations
        # by decreasing value, so that GPUs the plan could not use node-wise do not sit idle.
        started: set[int] = set()
        for backfill in (False, True):
            for k, view in enumerate(jobs):
                if view.placement is not None or k in started:
                    continue
                if not backfill and k not in assigned:
                    continue
                options = ([assigned[k]] if k in assigned else []) + (
                    sorted(values[k], key=lambda c: (-values[k][c], c)) if backfill else []
                )
                for config in options:
                    launch = self._launch(snapshot, alloc, view, config)
                    if launch is not None:
                        alloc.place(launch.cell)
                        actions.append(
                            Start(view.job.job_id, launch.cell, launch.constraints, launch.tuning)
                        )
                        started.add(k)
                        break
        return actions
