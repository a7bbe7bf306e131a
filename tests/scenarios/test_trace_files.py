"""Trace files on a cluster: every format read through one entry point, priced by the tuner."""

from __future__ import annotations

from pathlib import Path

import pytest

from crius_gym.errors import InputFileError, UnknownNameError
from crius_gym.scenarios import load_scenario
from crius_gym.scenarios.trace_files import read_trace, tuner_timer
from crius_gym.workload.mapping import JobMapping

FIXTURES = Path(__file__).parents[1] / "workload" / "fixtures"
FILES = {
    "csv": FIXTURES / "generic.csv",
    "philly": FIXTURES / "philly" / "cluster_job_log",
    "helios": FIXTURES / "helios" / "Venus" / "cluster_log.csv",
    "pai": FIXTURES / "pai" / "pai_job_table.csv",
}
DURATIONS_S = {  # the fixtures' run times of the jobs that are kept
    "philly": [3600.0, 4800.0],
    "helios": [7200.0, 1800.0],
    "pai": [3600.0, 600.0],
}


@pytest.fixture(scope="module")
def tuner():
    return load_scenario("hetero-64").make_tuner()


@pytest.mark.parametrize("fmt", sorted(DURATIONS_S))
def test_durations_become_iterations_at_the_tuners_speed(tuner, fmt):
    trace = read_trace(FILES[fmt], tuner=tuner)  # format detected
    timer = tuner_timer(tuner)
    assert len(trace) == len(DURATIONS_S[fmt])
    for job, duration_s in zip(trace.jobs, DURATIONS_S[fmt], strict=True):
        assert job.requested_gpu_type in tuner.cluster.gpu_types
        seconds = timer(job.model, job.global_batch, job.requested_gpus, job.requested_gpu_type)
        assert seconds is not None
        assert abs(job.iterations * seconds - duration_s) <= max(seconds / 2, 1e-9)


def test_explicit_format_seed_and_arena_pass_through(tuner, tmp_path):
    a = read_trace(FILES["csv"], "csv", tuner=tuner, mapping=JobMapping(seed=1))
    assert a == read_trace(FILES["csv"], tuner=tuner, mapping=JobMapping(seed=1))
    arena = tmp_path / "simulate_trace_x.csv"
    arena.write_text(
        "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type\n"
        "a,100,50,bert__760M,400,128,2,a40\n"
    )
    trace = read_trace(arena, tuner=tuner)
    assert trace.jobs[0].iterations == 10 and trace.iteration_divisor == 5
    with pytest.raises(UnknownNameError, match="trace format"):
        read_trace(FILES["csv"], "swf", tuner=tuner)


def test_a_folder_or_a_pai_table_without_its_tasks_is_refused(tuner, tmp_path):
    with pytest.raises(InputFileError, match="is a folder"):
        read_trace(tmp_path, tuner=tuner)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("a,i,u,Terminated,0,60\n")
    with pytest.raises(FileNotFoundError, match=r"pai_task_table\.csv"):
        read_trace(jobs, "pai", tuner=tuner)
