"""The Arena trace reader: public traces, and malformed files with exact lines and fields."""

from __future__ import annotations

import pytest

from crius_gym import datasets
from crius_gym.errors import ConfigError, InputFileError, UnknownNameError
from crius_gym.workload.arena_trace import (
    arena_iteration_divisor,
    load_arena_trace,
    read_arena_trace,
)
from tests.conftest import require_data

HEADER = "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,gpu_type"
GOOD = "a,100,50,bert__760M,400,128,2,a40"


def write(tmp_path, *lines, name="trace.csv"):
    path = tmp_path / name
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


@pytest.mark.parametrize(
    ("which", "count"), [("philly", 1938), ("venus", 438), ("pai", 125), ("testbed", 244)]
)
def test_public_traces_read_completely(which, count):
    require_data(datasets.ARENA_TRACES[which])
    trace = load_arena_trace(which)
    assert trace.name == which
    assert len(trace) == count
    assert trace.skipped == ()
    arrivals = [j.arrival_s for j in trace.jobs]
    assert arrivals[0] == 0.0
    assert arrivals == sorted(arrivals)
    assert {j.requested_gpu_type for j in trace.jobs} <= {"a40", "a10", "a100-40gb", "v100-32gb"}
    assert all(j.deadline_s is not None and j.deadline_s >= j.arrival_s for j in trace.jobs)


def test_philly_first_job_is_rebased():
    require_data(datasets.ARENA_TRACES["philly"])
    job = load_arena_trace("philly").jobs[0]
    # Line 2 of the file: f043f272-…,1945645,119965,bert__2.6B,1956739,256,4,a40
    assert job.job_id == "f043f272-f7a0-6861-353c-30479e8fffc1"
    assert job.arrival_s == 0.0
    assert job.deadline_s == 1956739 - 1945645
    # The artifact's simulator runs num_iteration // 5 (simulator.py::_submit_jobs).
    assert (job.model.name, job.global_batch, job.iterations) == ("bert-2.6b", 256, 119965 // 5)
    assert (job.requested_gpus, job.requested_gpu_type) == (4, "a40")
    as_stored = load_arena_trace("philly", iteration_divisor=1)
    assert as_stored.jobs[0].iterations == 119965 and as_stored.iteration_divisor == 1


@pytest.mark.parametrize(
    ("which", "divisor"), [("philly", 5), ("venus", 5), ("pai", 5), ("testbed", 1)]
)
def test_public_traces_follow_the_artifact_divisor(which, divisor):
    path = require_data(datasets.ARENA_TRACES[which])
    trace = load_arena_trace(which)
    assert trace.iteration_divisor == divisor == arena_iteration_divisor(path)
    raw = load_arena_trace(which, iteration_divisor=1)
    assert [j.iterations for j in trace.jobs] == [max(1, j.iterations // divisor) for j in raw.jobs]


def test_divisor_floors_and_keeps_at_least_one_iteration(tmp_path):
    lines = [HEADER, "a,0,12,bert__760M,,128,2,a40", "b,1,4,bert__760M,,128,2,a40"]
    path = write(tmp_path, *lines, name="simulate_trace_mine.csv")
    trace = read_arena_trace(path)
    assert trace.iteration_divisor == 5
    assert [j.iterations for j in trace.jobs] == [2, 1]  # 12 // 5 = 2; 4 // 5 = 0 -> 1
    other = write(tmp_path, *lines, name="mine.csv")  # not an artifact simulation trace
    assert [j.iterations for j in read_arena_trace(other).jobs] == [12, 4]
    assert [j.iterations for j in read_arena_trace(other, iteration_divisor=3).jobs] == [4, 1]
    for bad in (0, -5, 2.5, True):
        with pytest.raises(ConfigError, match="iteration_divisor"):
            read_arena_trace(other, iteration_divisor=bad)


def test_unsorted_pai_trace_is_sorted_from_its_earliest_job():
    path = require_data(datasets.ARENA_TRACES["pai"])
    trace = read_arena_trace(path)
    assert trace.name == "simulate_trace_pai"
    assert min(j.arrival_s for j in trace.jobs) == 0.0 == trace.jobs[0].arrival_s


def test_rebase_sort_ties_aliases_and_optional_deadline(tmp_path):
    path = write(
        tmp_path,
        HEADER,
        "late,500,10,moe__690M,,256,4,A100",
        "tie1,200,10,bert__760M,900,128,1,a10",
        "tie2,200,10,wide_resnet__500M,1200,256,8,v100",
        "first,150,10,bert-1.3b,160,128,2,a40",
    )
    trace = read_arena_trace(path, name="tiny")
    assert trace.name == "tiny"
    assert [j.job_id for j in trace.jobs] == ["first", "tie1", "tie2", "late"]
    assert [j.arrival_s for j in trace.jobs] == [0.0, 50.0, 50.0, 350.0]
    assert [j.deadline_s for j in trace.jobs] == [10.0, 750.0, 1050.0, None]
    assert trace.jobs[-1].requested_gpu_type == "a100-40gb"
    assert trace.jobs[2].requested_gpu_type == "v100-32gb"


def test_deadline_column_may_be_absent(tmp_path):
    path = write(
        tmp_path,
        "job_id,submission_time,num_iteration,model_name,batch_size,num_gpu,gpu_type",
        "x,5,10,moe__2.4B,256,4,a40",
    )
    (job,) = read_arena_trace(path).jobs
    assert job.deadline_s is None and job.arrival_s == 0.0


def test_bad_rows_are_skipped_with_line_and_field(tmp_path):
    path = write(
        tmp_path,
        HEADER,  # line 1
        GOOD,  # 2
        "b,100,50,gpt__9000T,400,128,2,a40",  # 3 unknown model
        "c,100,50,bert__760M,400,128,2,tpu",  # 4 unknown GPU type
        "d,100,many,bert__760M,400,128,2,a40",  # 5 non-numeric iterations
        "e,100,50,bert__760M,400,-128,2,a40",  # 6 negative batch
        "a,120,50,bert__760M,400,128,2,a40",  # 7 duplicate of line 2
        "",  # 8 blank line: ignored, but counted
        "f,100,50,bert__760M,400,128,,a40",  # 9 blank num_gpu
        "g,100,50,bert__760M,400,128,2.5,a40",  # 10 fractional GPU count
        "h,100,50,bert__760M,50,128,2,a40",  # 11 deadline before submission
        "i,-5,50,bert__760M,400,128,2,a40",  # 12 negative submission time
        "j,100,0,bert__760M,400,128,2,a40",  # 13 zero iterations
        "k,100,50,bert__760M,400,128,2,a40,extra",  # 14 too many fields
        "l,nan,50,bert__760M,400,128,2,a40",  # 15 not finite
        "m,130,50,moe__690M,400,256,4,a10",  # 16 good
    )
    trace = read_arena_trace(path)
    assert [j.job_id for j in trace.jobs] == ["a", "m"]
    got = [(i.line, i.reason.split(":")[0]) for i in trace.skipped]
    assert got == [
        (3, "model_name"),
        (4, "gpu_type"),
        (5, "num_iteration"),
        (6, "batch_size"),
        (7, "job_id"),
        (9, "num_gpu"),
        (10, "num_gpu"),
        (11, "deadline"),
        (12, "submission_time"),
        (13, "num_iteration"),
        (14, "row has 9 fields, header has 8"),
        (15, "submission_time"),
    ]
    reasons = {i.line: i.reason for i in trace.skipped}
    assert "gpt__9000T" in reasons[3]
    assert "'tpu'" in reasons[4]
    assert "'many' is not a number" in reasons[5]
    assert "must be positive" in reasons[6]
    assert "first on line 2" in reasons[7]
    assert "blank" in reasons[9]
    assert "integer" in reasons[10]


def test_missing_column_names_file_and_column(tmp_path):
    path = write(tmp_path, HEADER.replace(",num_gpu", ""), "a,100,50,bert__760M,400,128,a40")
    with pytest.raises(InputFileError) as err:
        read_arena_trace(path)
    assert err.value.field == "num_gpu"
    assert err.value.path == str(path)
    assert "num_gpu" in str(err.value) and str(path) in str(err.value)


def test_empty_file(tmp_path):
    path = write(tmp_path)
    with pytest.raises(InputFileError, match="empty file") as err:
        read_arena_trace(path)
    assert err.value.path == str(path)


def test_header_only(tmp_path):
    with pytest.raises(InputFileError, match="no job rows"):
        read_arena_trace(write(tmp_path, HEADER))


def test_all_rows_bad(tmp_path):
    path = write(
        tmp_path,
        HEADER,
        "b,100,50,gpt__9000T,400,128,2,a40",
        "c,100,50,bert__760M,400,128,2,tpu",
    )
    with pytest.raises(InputFileError) as err:
        read_arena_trace(path)
    message = str(err.value)
    assert str(path) in message and "no usable rows (2 skipped" in message
    assert "line 2: model_name" in message and "line 3: gpu_type" in message


def test_missing_file_and_unknown_trace(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_arena_trace(tmp_path / "absent.csv")
    with pytest.raises(UnknownNameError, match="philly"):
        load_arena_trace("helios")
