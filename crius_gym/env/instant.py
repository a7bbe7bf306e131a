"""Changes made at the current instant: how often each job was started, moved or preempted.

The env lets a job change at most ``changes_per_instant`` times before time moves
(:class:`~crius_gym.env.config.EnvConfig`); otherwise a policy could reconfigure, or preempt
and restart, a job forever at one instant.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable


class InstantChanges:
    """Per-job change counts of the current instant.

    Args:
        limit: changes allowed per job and instant (>= 1).
    """

    def __init__(self, limit: int = 1) -> None:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        self.limit = limit
        self.at_s = -1.0
        self._counts: Counter[int] = Counter()

    def start(self, now_s: float) -> None:
        """Forget the counts once time has moved past the instant they were made at."""
        if now_s != self.at_s:
            self.at_s, self._counts = now_s, Counter()

    def reset(self) -> None:
        """Forget everything (a new episode)."""
        self.at_s, self._counts = -1.0, Counter()

    def add(self, index: int) -> None:
        """Count one change of the job with trace index ``index``."""
        self._counts[index] += 1

    def update(self, indices: Iterable[int]) -> None:
        """Count one change of each job in ``indices``."""
        for i in indices:
            self.add(i)

    def changed(self) -> list[int]:
        """Jobs changed at this instant (at least once)."""
        return list(self._counts)

    def blocked(self) -> frozenset[int]:
        """Jobs that may not change again at this instant (their count reached the limit)."""
        return frozenset(i for i, n in self._counts.items() if n >= self.limit)

    def copy(self) -> InstantChanges:
        """An independent copy (forked envs, rollout states)."""
        out = InstantChanges(self.limit)
        out.at_s, out._counts = self.at_s, Counter(self._counts)
        return out

    __copy__ = copy
