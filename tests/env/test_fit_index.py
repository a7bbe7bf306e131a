from types import SimpleNamespace

from hypothesis import given, settings
from hypothesis import strategies as st

from crius_gym.env.config import EnvConfig
from crius_gym.env.decision import CellSelector, FitIndex
from crius_gym.hardware.cluster import build_cluster
from crius_gym.perf.cell import Cell
from crius_gym.perf.plan import Layout
from crius_gym.policies.crius import FitMemo
from crius_gym.sim.allocator import Allocator

CELLS = [Cell(t, Layout(n, g), 1) for t in ("a40", "a10") for n in (1, 2, 3, 4) for g in (1, 2, 4)]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, len(CELLS) - 1), max_size=12))
def test_the_env_and_the_heuristic_fit_as_the_allocator_does(picks):
    cluster = build_cluster(
        [
            {"gpu": "a40", "nodes": 4, "gpus_per_node": 4},
            {"gpu": "a10", "nodes": 3, "gpus_per_node": 2},
        ]
    )
    alloc = Allocator(cluster)
    held = [p for p in (alloc.place(CELLS[i]) for i in picks) if p is not None]
    index = FitIndex(alloc)
    memo = FitMemo(alloc)  # the Crius heuristic's fast form of the same rule
    for cell in CELLS:
        assert index.fits(cell) == alloc.can_place(cell) == memo.can_place(cell)
        for p in held:
            alloc.release(p)
            expected = alloc.can_place(cell)
            alloc.take(p)
            # One rule, owned by the allocator; the env and the heuristic agree with it.
            assert alloc.fits_after_release(cell, p) == expected
            assert index.fits_after_release(cell, p) == expected
            if cell.gpu_type == p.gpu_type:
                assert memo.fits_released(p, cell.layout) == expected
    # The per-job forms: padded candidate lists, answers in candidate order, padding False.
    sim = SimpleNamespace(cluster=cluster, tuner=None)
    selector = CellSelector(sim, EnvConfig(cells_per_job=len(CELLS) + 2))
    cands = selector._arrays(tuple(SimpleNamespace(cell=c, iter_time_s=1.0) for c in CELLS))
    assert index.fits_all(cands) == [alloc.can_place(c) for c in CELLS] + [False, False]
    for p in held:
        expected = [index.fits_after_release(c, p) for c in CELLS] + [False, False]
        assert index.fits_all_after_release(cands, p) == expected
