"""Modelling choices of the Crius/Arena artifact's simulator, as named options (all off by default).

The artifact (``sjtu-epcc/arena``, branch ``ae-eurosys``) simulates in 300 s rounds and keeps its
books differently from this simulator. To reproduce its published numbers, and to show what they
rest on, each of its choices is one switch of :class:`ArtifactCompat` (``sim.artifact_compat`` in
a scenario file). Two of them are artefacts of the reference, not modelling choices, and are
labelled so: ``progress: revalue`` and ``suspend_double_count``. ``docs/artifact_setting.md``
maps every option to the artifact's code and measures its effect.

=======================  =================================================================
option                   artifact behaviour (code location in the artifact)
=======================  =================================================================
``rounds``               time advances in ``round_s`` rounds (``simulator.py::simulate``):
                         a job arriving in ``(T, T + round_s]`` is submitted at ``T``
                         (``trace_manager.py::load_trace``), a job is seen to finish, and
                         releases its GPUs, only at the next round boundary
                         (``scheduler.py::_update_and_check_end``), so decisions fall on
                         boundaries only.
``progress: revalue``    completed work is re-valued at the current speed whenever the Cell
                         changes: iterations done = executed seconds // current iteration
                         time (``job/job.py::Job.update_remained_iter_num``). A grow or a move
                         to a faster GPU credits work no GPU did; a shrink removes work done.
``suspend_double_count`` on preemption the target becomes the remaining iterations while the
                         executed seconds are kept (``scheduler.py::_suspend_one_job``), so
                         the work before the suspension counts twice after the restart.
``tuning_charge:         a (re)start whose tuning fits in a round costs no progress (only the
artifact``               round's reported throughput is scaled); a longer one skips
                         ``ceil(t / round_s) - 1`` rounds of progress
                         (``scheduler.py::_get_cluster_perf``, ``resched_time_debt_table``).
=======================  =================================================================
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from crius_gym.errors import ConfigError

# Times within this of a round boundary are on it (float sums of 300 s steps drift by ~1e-10).
_BOUNDARY_TOL_S = 1e-6

ProgressModel = Literal["integrate", "revalue"]
TuningCharge = Literal["pause", "artifact"]


@dataclass(frozen=True)
class ArtifactCompat:
    """The artifact simulator's modelling choices (see the module docstring).

    Attributes:
        round_s: length of a scheduling round, seconds (artifact: ``SCHEDULING_INTERVAL`` =
            300). Used by ``rounds`` and by ``tuning_charge: artifact``.
        rounds: discretise time into rounds: arrivals move to the start of their round,
            completions (and the release of GPUs) to the next boundary, so decisions fall on
            boundaries only.
        progress: ``integrate`` (default: iterations done = ∫ dt / iteration time of the Cell
            run at the time) or ``revalue`` (an artefact of the reference: executed seconds /
            current iteration time, re-valued at every Cell change).
        suspend_double_count: on preemption keep the executed seconds and lower the target to
            the remaining iterations, so earlier work is counted twice (an artefact of the
            reference; needs ``progress: revalue``).
        tuning_charge: ``pause`` (default: a (re)started job pauses for its whole tuning and
            restore time) or ``artifact`` (no pause when that time fits in ``round_s``,
            otherwise ``round_s * (ceil(t / round_s) - 1)`` of lost progress).
    """

    round_s: float = 300.0
    rounds: bool = False
    progress: ProgressModel = "integrate"
    suspend_double_count: bool = False
    tuning_charge: TuningCharge = "pause"

    def __post_init__(self) -> None:
        if not self.round_s > 0 or not math.isfinite(self.round_s):
            raise ConfigError("sim.artifact_compat.round_s must be a positive number of seconds")
        if self.progress not in ("integrate", "revalue"):
            raise ConfigError(
                f"sim.artifact_compat.progress must be 'integrate' or 'revalue', "
                f"got {self.progress!r}"
            )
        if self.tuning_charge not in ("pause", "artifact"):
            raise ConfigError(
                f"sim.artifact_compat.tuning_charge must be 'pause' or 'artifact', "
                f"got {self.tuning_charge!r}"
            )
        if self.suspend_double_count and self.progress != "revalue":
            raise ConfigError(
                "sim.artifact_compat.suspend_double_count needs progress: revalue (the double "
                "count is the artifact's executed seconds surviving a suspension)"
            )

    @property
    def revalue(self) -> bool:
        """Whether progress is re-valued at the current speed."""
        return self.progress == "revalue"

    @property
    def active(self) -> tuple[str, ...]:
        """Names of the options that differ from the defaults (for reports)."""
        out = []
        if self.rounds:
            out.append(f"rounds ({self.round_s:g} s)")
        if self.revalue:
            out.append("progress re-valued")
        if self.suspend_double_count:
            out.append("suspension double count")
        if self.tuning_charge == "artifact":
            out.append("artifact tuning charge")
        return tuple(out)

    # ------------------------------------------------------------------ round arithmetic
    def round_start_s(self, t_s: float) -> float:
        """Start of the round a job arriving at ``t_s`` is submitted in.

        The artifact's first round holds the arrivals in ``[0, round_s]``, round ``k >= 1`` those
        in ``(k·round_s, (k+1)·round_s]``, and submits them at the round's start.
        """
        k = math.ceil(t_s / self.round_s - _BOUNDARY_TOL_S / self.round_s) - 1
        return max(0, k) * self.round_s

    def completion_s(self, start_s: float, finish_s: float) -> float:
        """When a job that started iterating at ``start_s`` and ends its work at ``finish_s`` ends.

        The first boundary at or after ``finish_s`` and after ``start_s`` (a job credited at a
        boundary has run at least the round since).
        """
        r = self.round_s
        k = math.ceil(finish_s / r - _BOUNDARY_TOL_S / r)
        first_after_start = math.floor(start_s / r + _BOUNDARY_TOL_S / r) + 1
        return max(k, first_after_start) * r

    def tuning_pause_s(self, charge_s: float) -> float:
        """Lost progress of a (re)start whose tuning and restore take ``charge_s`` seconds."""
        if charge_s <= self.round_s + _BOUNDARY_TOL_S:
            return 0.0
        return self.round_s * (math.ceil(charge_s / self.round_s - _BOUNDARY_TOL_S) - 1)

    def next_boundary_s(self, t_s: float) -> float:
        """The first round boundary at or after ``t_s``."""
        return math.ceil(t_s / self.round_s - _BOUNDARY_TOL_S / self.round_s) * self.round_s
