"""The policy boundary: every scheduler, rule-based or learned, implements :class:`Policy`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from crius_gym.hardware.cluster import ClusterSpec
from crius_gym.perf.tuner import Tuner
from crius_gym.sim.actions import Action
from crius_gym.sim.snapshot import Snapshot


@dataclass(frozen=True)
class PolicyContext:
    """What a policy gets once per run.

    Attributes:
        cluster: the cluster.
        tuner: the cluster's tuner.
        rng: the policy's own random generator (seeded by the run).
    """

    cluster: ClusterSpec
    tuner: Tuner
    rng: np.random.Generator


class Policy(Protocol):
    """A scheduler.

    Attributes:
        name: registry name, used in reports.
        tick_interval_s: if set, the simulator also asks for decisions this often (seconds)
            while jobs are active, besides arrivals and completions.
    """

    name: str
    tick_interval_s: float | None

    def reset(self, context: PolicyContext) -> None:
        """Start a new run (clear any state kept between decisions)."""

    def decide(self, snapshot: Snapshot) -> Sequence[Action]:
        """The actions to take now (applied in order; may be empty)."""
