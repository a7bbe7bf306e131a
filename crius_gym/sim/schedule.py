"""Who held which GPUs when: the schedule of a run, as segments a Gantt chart can draw.

A **segment** is one uninterrupted hold of one placement by one job: it begins with a start, a
resume after preemption or a reconfiguration, and ends with the job's finish, a preemption, a
reconfiguration, the failure of a node or worker under a runtime (``failed``), or the end of the
run (``open``: still held). The restore pause after a start or
reconfiguration is inside the segment (the GPUs are held while the job restores).

The simulator appends segments to a :class:`ScheduleLog`, an append-only log whose copies share
what they have in common: a simulator clone (a rollout) costs O(1) for its log however long the
run has been, and a clone's appends never show in the original.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

#: How a segment began.
Began = Literal["start", "resume", "reconfigure"]
#: How a segment ended (``open``: the job still held the GPUs when the run stopped).
Ended = Literal["finish", "preempt", "reconfigure", "open", "failed"]


@dataclass(frozen=True)
class Segment:
    """One job on one placement over one interval.

    Attributes:
        job_index: the job's position in the trace.
        job_id: its id.
        gpu_type: the node group's GPU type.
        nodes: node indices inside that group.
        gpus_per_node: GPUs held on each of them.
        start_s: when the hold began, seconds.
        end_s: when it ended, seconds (the run's stop time for an ``open`` segment).
        began: what began it.
        ended: what ended it.
    """

    job_index: int
    job_id: str
    gpu_type: str
    nodes: tuple[int, ...]
    gpus_per_node: int
    start_s: float
    end_s: float
    began: Began
    ended: Ended

    @property
    def num_gpus(self) -> int:
        """GPUs held."""
        return len(self.nodes) * self.gpus_per_node


class ScheduleLog:
    """An append-only list of segments whose copies share storage (copy-on-diverge).

    Items are never changed in place, so a copy may keep the same backing list with its own
    length; the first append of a copy whose length no longer ends the backing list takes its
    own prefix first.
    """

    __slots__ = ("_items", "_n")

    def __init__(self) -> None:
        self._items: list[Segment] = []
        self._n = 0

    def append(self, segment: Segment) -> None:
        """Add a segment at the end."""
        if len(self._items) != self._n:  # another copy appended to the shared list
            self._items = self._items[: self._n]
        self._items.append(segment)
        self._n += 1

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[Segment]:
        return iter(self._items[: self._n])

    def __deepcopy__(self, memo: dict[int, object]) -> ScheduleLog:
        twin = ScheduleLog.__new__(ScheduleLog)
        twin._items, twin._n = self._items, self._n  # segments are immutable: share them
        return twin

    def __getstate__(self) -> tuple[list[Segment], int]:
        return self._items[: self._n], self._n

    def __setstate__(self, state: tuple[list[Segment], int]) -> None:
        self._items, self._n = state
