import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import Layout
from crius_gym.sim.allocator import Allocator
from crius_gym.sim.events import EventKind, EventQueue


def test_event_order_time_priority_sequence():
    q = EventQueue()
    q.push(5.0, EventKind.ARRIVAL, 1)
    q.push(5.0, EventKind.COMPLETION, 2)
    q.push(1.0, EventKind.TICK)
    q.push(5.0, EventKind.ARRIVAL, 3)
    q.push(5.0, EventKind.COMPLETION, 4)
    out = [(e.time_s, e.kind, e.job_index) for e in (q.pop() for _ in range(5))]
    assert out == [
        (1.0, EventKind.TICK, -1),
        (5.0, EventKind.COMPLETION, 2),
        (5.0, EventKind.COMPLETION, 4),
        (5.0, EventKind.ARRIVAL, 1),
        (5.0, EventKind.ARRIVAL, 3),
    ]
    assert q.peek_time() is None


def test_best_fit_consolidates_and_respects_layout():
    cluster = build_cluster([{"gpu": "a100", "nodes": 3, "gpus_per_node": 4}])
    a = Allocator(cluster)
    p1 = a.place(Cell("a100-40gb", Layout(1, 2), 1))
    p2 = a.place(Cell("a100-40gb", Layout(1, 2), 1))
    assert p1.nodes == p2.nodes == (0,)  # filled the same node first
    assert a.place(Cell("a100-40gb", Layout(2, 4), 1)).nodes == (1, 2)
    assert a.free_gpus("a100-40gb") == 0
    assert not a.can_place(Cell("a100-40gb", Layout(1, 1), 1))
    a.release(p1)
    assert list(a.free_per_node("a100-40gb")) == [2, 0, 0]
    # Fragmentation is real: 2 free GPUs on one node do not make a 1x4 or a 2x2 Cell.
    assert not a.can_place(Cell("a100-40gb", Layout(2, 2), 1))
    assert a.can_place(Cell("a100-40gb", Layout(1, 2), 1))


def _best_fit(free: list[int], nodes: int, gpus_per_node: int) -> tuple[int, ...] | None:
    """The allocator's rule by brute force: fewest free GPUs that fit, then lowest index."""
    fits = sorted((f, i) for i, f in enumerate(free) if f >= gpus_per_node)
    return tuple(sorted(i for _, i in fits[:nodes])) if len(fits) >= nodes else None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2]), st.booleans()), max_size=40
    )
)
def test_allocation_invariants(ops):
    cluster = build_cluster(
        [
            {"gpu": "a40", "nodes": 4, "gpus_per_node": 4},
            {"gpu": "a10", "nodes": 2, "gpus_per_node": 2},
        ]
    )
    a = Allocator(cluster)
    held = []
    for gpn, nodes, release in ops:
        if release and held:
            a.release(held.pop(0))
        else:
            for t in ("a40", "a10"):
                cell = Cell(t, Layout(nodes, gpn), 1)
                expected = _best_fit(a.free_per_node(t).tolist(), nodes, gpn)
                assert a.can_place(cell) == (expected is not None)
                p = a.place(cell)
                assert (p.nodes if p else None) == expected
                if p is not None:
                    held.append(p)
                    assert len(set(p.nodes)) == len(p.nodes) and p.gpu_type == t
        for g in cluster.groups:
            free = a.free_per_node(g.gpu_type)
            used = sum(p.num_gpus for p in held if p.gpu_type == g.gpu_type)
            assert (free >= 0).all() and (free <= g.gpus_per_node).all()
            assert int(free.sum()) + used == g.num_gpus == a.free_gpus(g.gpu_type) + used
            for need in range(g.gpus_per_node + 2):  # the histogram behind the fit checks
                assert a.nodes_with(g.gpu_type, need) == int((free >= need).sum())
        every = a.free_per_node_all()  # groups in order, the same numbers as per type
        assert every.tolist() == [n for g in cluster.groups for n in a.free_per_node(g.gpu_type)]
        assert a.busy_gpus() == sum(p.num_gpus for p in held)
    other = a.copy()
    assert isinstance(other.free_per_node("a40"), np.ndarray)
    before = a.free_per_node_all().copy()
    other.place(Cell("a40", Layout(1, 1), 1))  # a copy is independent of the original
    assert np.array_equal(a.free_per_node_all(), before)


def _histogram(a: Allocator, gpu_type: str, capacity: int) -> list[int]:
    return np.bincount(a.free_per_node(gpu_type), minlength=capacity + 1).tolist()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([1, 2, 4]), st.sampled_from([1, 2])), max_size=12),
    st.integers(0, 11),
    st.sampled_from(["a40", "a10"]),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([1, 2]),
)
def test_histogram_after_move_is_release_then_place(cells, victim, target, gpn, nodes):
    """What the Crius search reads instead of building a state: release + place on a copy."""
    cluster = build_cluster(
        [
            {"gpu": "a40", "nodes": 4, "gpus_per_node": 4},
            {"gpu": "a10", "nodes": 3, "gpus_per_node": 2},
        ]
    )
    caps = {"a40": 4, "a10": 2}
    a = Allocator(cluster)
    held = [
        p
        for k, (g, n) in enumerate(cells)
        if (p := a.place(Cell(("a40", "a10")[k % 2], Layout(n, g), 1))) is not None
    ]
    if not held:
        return
    release = held[victim % len(held)]
    cell = Cell(target, Layout(nodes, gpn), 1)
    moved = a.copy()
    moved.release(release)
    fits = moved.place(cell) is not None
    for t in ("a40", "a10"):
        if fits:
            assert a.histogram_after_move(t, release, cell) == _histogram(moved, t, caps[t])
        elif t == target:
            with pytest.raises(RuntimeError, match="does not fit"):
                a.histogram_after_move(t, release, cell)
