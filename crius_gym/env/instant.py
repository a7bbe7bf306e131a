"""Changes made at the current instant: how often each job was started, moved or preempted.

The env lets a job change at most ``changes_per_instant`` times before time moves
(:class:`~crius_gym.env.config.EnvConfig`); otherwise a policy could reconfigure, or preempt
and restart, a job forever at one instant. With more than one change allowed, a later change
may not put a job back on the Cell it held when the instant began: that undoes the first change
and pays its restore twice (a distilled network did exactly that, thousands of times, on the
Arena Philly trace: docs/env.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from crius_gym.perf.cell import Cell


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
        self._origins: dict[int, Cell] = {}

    def start(self, now_s: float) -> None:
        """Forget the counts once time has moved past the instant they were made at."""
        if now_s != self.at_s:
            self.at_s, self._counts, self._origins = now_s, Counter(), {}

    def reset(self) -> None:
        """Forget everything (a new episode)."""
        self.at_s, self._counts, self._origins = -1.0, Counter(), {}

    def add(self, index: int, cell: Cell | None = None) -> None:
        """Count one change of the job with trace index ``index``.

        Args:
            index: the job's trace index.
            cell: the Cell it held just before this change (None: it was waiting); the first
                change of the instant records it as the job's origin.
        """
        # With one change per instant a changed job is blocked outright: no origin is needed.
        if self.limit > 1 and not self._counts[index] and cell is not None:
            self._origins[index] = cell
        self._counts[index] += 1

    def update(self, changes: Iterable[tuple[int, Cell | None]]) -> None:
        """Count one change of each ``(index, cell before the change)``."""
        for i, cell in changes:
            self.add(i, cell)

    def changed(self) -> list[int]:
        """Jobs changed at this instant (at least once)."""
        return list(self._counts)

    def blocked(self) -> frozenset[int]:
        """Jobs that may not change again at this instant (their count reached the limit)."""
        return frozenset(i for i, n in self._counts.items() if n >= self.limit)

    def origins(self) -> Mapping[int, Cell]:
        """Jobs that may change again at this instant, each with the Cell it may not go back to.

        That Cell is the one the job held when the instant began (running jobs only).
        """
        return {i: c for i, c in self._origins.items() if self._counts[i] < self.limit}

    def copy(self) -> InstantChanges:
        """An independent copy (forked envs, rollout states)."""
        out = InstantChanges(self.limit)
        out.at_s, out._counts = self.at_s, Counter(self._counts)
        out._origins = dict(self._origins)
        return out

    __copy__ = copy
