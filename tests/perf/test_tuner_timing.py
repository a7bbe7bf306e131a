"""The shared tuner timing workloads (what validate_estimator.py and benchmark.py report)."""

from crius_gym.perf.tuner_timing import ARENA_JOBS, cold_tune_ms, large_cell_search


def test_cold_tune_times_every_arena_job(alpa):
    times = cold_tune_ms(alpa, 1)
    assert len(times) == len(ARENA_JOBS) == 39 and all(t > 0 for t in times)


def test_the_175b_cell_finds_a_plan_with_fewer_plans_than_the_space(megatron):
    seconds, priced, plan = large_cell_search(megatron, 1)
    assert seconds > 0 and 0 < priced < 2592  # 2,592 plans in the space; chains price fewer
    assert plan.startswith("p") and plan.endswith(" s)")
