"""Named trace sets, and jobs requesting GPU types the cluster lacks (counted, or refused)."""

from __future__ import annotations

import pytest

from crius_gym.errors import ConfigError
from crius_gym.eval.trace_sets import check_requests, foreign_requests, trace_set
from crius_gym.scenarios import load_scenario
from crius_gym.workload.job import Trace


@pytest.fixture(scope="module")
def tiny():
    sc = load_scenario("tiny")
    return sc, sc.make_tuner()


def test_sets_and_max_traces(tiny):
    sc, tuner = tiny
    assert [t.name for t in trace_set(sc, "test", tuner)] == ["tiny-test-0", "tiny-test-1"]
    assert [t.name for t in trace_set(sc, "val", tuner, max_traces=1)] == ["tiny-val-0"]
    with pytest.raises(ConfigError, match="no traces in set 'own'"):
        trace_set(sc, "own", tuner)  # synthetic-only: no own trace
    with pytest.raises(ConfigError, match="expected one of"):
        trace_set(sc, "train", tuner)


def test_foreign_types_are_counted_warned_and_refused_with_strict(tiny, capsys):
    sc, tuner = tiny
    base = trace_set(sc, "test", tuner)[0]
    jobs = list(base.jobs)
    jobs[0] = jobs[0].__class__(**{**jobs[0].__dict__, "requested_gpu_type": "v100"})
    moved = Trace(name="moved", jobs=tuple(jobs))
    assert foreign_requests(base, sc.cluster.gpu_types) == {}
    assert foreign_requests(moved, sc.cluster.gpu_types) == {"v100": 1}
    lines = check_requests([base, moved], sc.cluster.gpu_types)
    assert len(lines) == 1 and "1 of 16 jobs" in lines[0] and "1 × v100" in lines[0]
    assert "warning: moved: 1 of 16 jobs" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--strict: moved"):
        check_requests([moved], sc.cluster.gpu_types, strict=True)
