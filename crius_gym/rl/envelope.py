"""A deployed policy's envelope: the states it was trained in, beyond which the guide decides.

Training episodes are short (tens of jobs on clusters of tens to about a thousand GPUs), so a
policy never sees a long queue, nor hundreds of jobs running at once. Out there its network is
extrapolating, and a learned policy is not to be trusted outside its training distribution:
the online-safety-assurance rule of Rotman, Schapira & Tamar (HotNets 2020, arXiv 2010.03625)
defaults to the heuristic there. The envelope is measured, not tuned
(:func:`crius_gym.rl.deviation.measure_envelope`): the most jobs the agent saw waiting, and
running, at any decision of a fixed set of its training episodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Envelope:
    """The most jobs waiting and running that a policy saw in training.

    Attributes:
        waiting: jobs waiting.
        running: jobs running (None: not bounded; envelopes recorded before this bound existed
            name only the waiting jobs).
    """

    waiting: int
    running: int | None = None

    def __post_init__(self) -> None:
        for name in ("waiting", "running"):
            value = getattr(self, name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 0
            ):
                raise ValueError(f"envelope {name} must be a whole number >= 0, got {value!r}")

    def holds(self, waiting: int, running: int) -> bool:
        """Whether a decision with that many jobs waiting and running is inside it."""
        return waiting <= self.waiting and (self.running is None or running <= self.running)

    def describe(self) -> str:
        """E.g. ``4 waiting / 38 running jobs``."""
        running = "" if self.running is None else f" / {self.running} running"
        return f"{self.waiting} waiting{running} jobs"

    def as_metadata(self) -> dict[str, Any]:
        """The fields of a ``deployment`` block (``max_waiting``, ``max_running``)."""
        out: dict[str, Any] = {"max_waiting": self.waiting}
        if self.running is not None:
            out["max_running"] = self.running
        return out
