"""Serial and Ray-parallel evaluation give identical results."""

import pytest

from crius_gym.eval.tables import summary_frame
from crius_gym.eval.tasks import HeuristicTask, execute, run_tasks
from crius_gym.scenarios import load_scenario


def tasks():
    sc = load_scenario("tiny")
    traces = [sc.synthetic_trace("test", i) for i in range(2)]
    return [
        HeuristicTask(p, "tiny", t, seed=1) for p in ("crius", "random", "fcfs") for t in traces
    ]


def test_tasks_are_deterministic():
    t = tasks()[0]
    assert execute(t).result.jobs == execute(t).result.jobs


@pytest.mark.ray
def test_ray_evaluation_matches_serial():
    pytest.importorskip("ray")
    ts = tasks()
    serial = run_tasks(ts)
    parallel = run_tasks(ts, use_ray=True)
    assert [r.result.jobs for r in serial] == [r.result.jobs for r in parallel]
    assert summary_frame([r.result for r in serial]).equals(
        summary_frame([r.result for r in parallel])
    )


def test_tables_flag_changes_over_unfinished_work():
    import pandas as pd

    from crius_gym.eval.tables import aggregate, markdown_table

    rows = [
        {
            "policy": p,
            "trace": "t",
            "avg_jct_s": j,
            "avg_queueing_s": 1.0,
            "avg_throughput": 1.0,
            "unfinished": u,
        }
        for p, j, u in (("crius", 10.0, 0), ("truncated", 5.0, 3))
    ]
    table = markdown_table(
        aggregate(pd.DataFrame(rows), columns=("avg_jct_s", "unfinished")),
        columns=("avg_jct_s", "unfinished"),
    )
    assert "-50.0 †" in table and "compare different sets of jobs" in table
