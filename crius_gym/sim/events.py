"""The event queue: a heap ordered by (time, priority, sequence number).

Ties in time resolve by priority (completions before arrivals, so freed GPUs are visible to the
decision that follows) and then by insertion order, so every run orders events the same way.
Cancelled events are skipped lazily: each carries the version of its job at scheduling time.
"""

from __future__ import annotations

import heapq
from enum import IntEnum
from typing import NamedTuple


class EventKind(IntEnum):
    """Event types; the value is the tie-break priority (lower first)."""

    COMPLETION = 0
    RESUME = 1  # a paused (tuning / restoring) job starts iterating
    ARRIVAL = 2
    TICK = 3


class Event(NamedTuple):
    """A scheduled event, ordered by (time, kind, seq).

    A tuple: the heap compares events in C. ``seq`` is unique, so the fields after it never
    take part in the order.

    Attributes:
        time_s: when it happens.
        kind: what happens (also the tie-break priority).
        seq: insertion counter (final tie-break).
        job_index: index of the job in the trace (-1 for ticks).
        version: the job's version when scheduled; stale events are ignored.
    """

    time_s: float
    kind: EventKind
    seq: int
    job_index: int = -1
    version: int = 0


class EventQueue:
    """A min-heap of events with a deterministic tie-break."""

    def __init__(self) -> None:
        self._heap: list[Event] = []
        self._seq = 0  # the next insertion number

    def push(self, time_s: float, kind: EventKind, job_index: int = -1, version: int = 0) -> None:
        """Schedule an event."""
        heapq.heappush(self._heap, Event(time_s, kind, self._seq, job_index, version))
        self._seq += 1

    def copy(self) -> EventQueue:
        """An independent copy (events are immutable, so the heap's list is copied only)."""
        other = EventQueue.__new__(EventQueue)
        other._heap = list(self._heap)
        other._seq = self._seq
        return other

    def without(self, kind: EventKind) -> EventQueue:
        """A copy without the events of one kind (same order for the others)."""
        other = EventQueue.__new__(EventQueue)
        other._heap = [e for e in self._heap if e.kind is not kind]
        heapq.heapify(other._heap)
        other._seq = self._seq
        return other

    def __deepcopy__(self, memo: dict[int, object]) -> EventQueue:
        return self.copy()

    def peek_time(self) -> float | None:
        """Time of the next event, or None when empty."""
        return self._heap[0].time_s if self._heap else None

    def pop(self) -> Event:
        """Remove and return the next event."""
        return heapq.heappop(self._heap)

    def __len__(self) -> int:
        return len(self._heap)
