"""What a policy may ask the simulator to do.

Every policy — rule-based or learned — returns a list of these from ``decide(snapshot)``; the
simulator applies them in order and never looks at which policy produced them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import PlanConstraints

#: Which parallelism search a job pays for when it (re)starts on a Cell: ``pruned`` (the
#: Cell-guided tuner, Crius), ``full`` (an unpruned auto-parallel search, the baselines "+AP"),
#: ``none`` (a fixed plan such as pure data parallelism needs no search).
TuningMode = Literal["pruned", "full", "none"]


@dataclass(frozen=True)
class Start:
    """Start (or restart) a waiting job on a Cell.

    Attributes:
        job_id: the job.
        cell: GPU type, layout and stages.
        constraints: plan restrictions inside the Cell (e.g. data parallelism only).
        tuning: the plan search the job pays for.
    """

    job_id: str
    cell: Cell
    constraints: PlanConstraints | None = None
    tuning: TuningMode = "pruned"


@dataclass(frozen=True)
class Reconfigure:
    """Move a running job to another Cell (shrink, grow or change GPU type), keeping progress.

    Attributes:
        job_id: the job.
        cell: the new Cell.
        constraints: plan restrictions in the new Cell.
        tuning: the plan search the job pays for.
    """

    job_id: str
    cell: Cell
    constraints: PlanConstraints | None = None
    tuning: TuningMode = "pruned"


@dataclass(frozen=True)
class Preempt:
    """Stop a running job and return it to the queue, keeping its progress."""

    job_id: str


@dataclass(frozen=True)
class Reject:
    """Give up on a waiting job the policy can never run (counted with its reason)."""

    job_id: str
    reason: str


Action = Start | Reconfigure | Preempt | Reject


class InvalidActionError(ValueError):
    """A policy asked for something impossible (a bug in the policy, not bad input)."""
