"""The snapshot's waiting queue: a lazy view whose cost is what a policy reads (issue 14: a
tuple of every waiting job at each decision made an overloaded 50,000-job run quadratic)."""

from collections.abc import Sequence

import pytest

from crius_gym.sim.snapshot import JobQueue


class CountingRecords(Sequence):
    """A record list that counts how many records were read."""

    def __init__(self, n: int) -> None:
        self.items = [f"job{i}" for i in range(n)]
        self.reads = 0

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i):
        self.reads += 1
        return self.items[i]


def test_queue_reads_only_what_is_used():
    records = CountingRecords(10_000)
    waiting = list(range(3, 10_000, 2))
    queue = JobQueue(records, waiting)  # type: ignore[arg-type]
    assert records.reads == 0
    assert len(queue) == len(waiting) and queue
    assert queue[0] == "job3" and queue[-1] == "job9999"
    assert records.reads == 2
    head = next(iter(queue))
    assert head == "job3" and records.reads == 3


def test_queue_behaves_as_a_sequence():
    records = CountingRecords(10)
    queue = JobQueue(records, [1, 4, 7])  # type: ignore[arg-type]
    assert list(queue) == ["job1", "job4", "job7"]
    assert queue[1:] == ("job4", "job7")
    assert "job4" in queue and queue.index("job7") == 2
    assert tuple(queue.indices) == (1, 4, 7)
    assert not JobQueue(records, [])  # type: ignore[arg-type]
    with pytest.raises(IndexError):
        queue[3]
