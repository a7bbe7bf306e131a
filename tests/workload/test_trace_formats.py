"""Trace formats: the generic CSV and the Philly, Helios and PAI readers, detection and mapping.

Fixtures in ``tests/workload/fixtures/`` are small files written for these tests in each
format's layout (never copies of the real traces).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from crius_gym.errors import ConfigError, InputFileError
from crius_gym.hardware.gpus import load_gpu_catalog
from crius_gym.workload.formats import detect_format, read_records
from crius_gym.workload.formats.generic import read_generic_csv
from crius_gym.workload.formats.helios import read_helios_log
from crius_gym.workload.formats.pai import read_pai_tables
from crius_gym.workload.formats.philly import read_philly_job_log
from crius_gym.workload.formats.records import RecordSet, TraceRecord
from crius_gym.workload.mapping import JobMapping, map_records
from crius_gym.workload.models import load_model_catalog

FIXTURES = Path(__file__).parent / "fixtures"
GENERIC = FIXTURES / "generic.csv"
PHILLY = FIXTURES / "philly" / "cluster_job_log"
HELIOS = FIXTURES / "helios" / "Venus" / "cluster_log.csv"
PAI = FIXTURES / "pai" / "pai_job_table.csv"
MODELS = load_model_catalog()
GPUS = load_gpu_catalog()
TYPES = ("a100-40gb", "v100-32gb", "a40")


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def reasons(records: RecordSet) -> dict[int, str]:
    return {i.line: i.reason for i in records.skipped}


# --- readers on their fixtures ------------------------------------------------------------------


def test_generic_csv_fixture():
    rs = read_generic_csv(GENERIC, MODELS, GPUS)
    assert rs.name == "generic" and rs.source_format == "csv"
    by_id = {r.job_id: r for r in rs.records}
    assert set(by_id) == {"g1", "g3", "g4"}
    assert by_id["g1"] == TraceRecord(
        line=2, job_id="g1", arrival_s=100.0, num_gpus=8, duration_s=3600.0, gpu_type="a100-40gb"
    )
    assert by_id["g3"].model is not None and by_id["g3"].model.name == "bert-760m"
    assert by_id["g3"].global_batch is None
    assert (by_id["g4"].gpu_type, by_id["g4"].deadline_s) == ("v100-32gb", 9000.0)
    assert reasons(rs) == {3: "model: unknown model 'gpt-1.3b'"}


def test_philly_fixture():
    rs = read_philly_job_log(PHILLY)
    assert [(r.job_id, r.num_gpus, r.duration_s) for r in rs.records] == [
        ("application_1_0001", 4, 3600.0),
        # Most GPUs of any attempt (2 machines x 2); first start to last end: 03:10 → 04:30.
        ("application_1_0002", 4, 80 * 60.0),
    ]
    assert rs.records[1].arrival_s - rs.records[0].arrival_s == 122.0
    assert reasons(rs) == {
        3: "attempts: no attempt: the job never started",
        4: "attempts[0].end_time: no time recorded (the job had not ended when the log was cut)",
    }


def test_helios_fixture():
    rs = read_helios_log(HELIOS)
    assert rs.name == "Venus"
    assert [(r.job_id, r.num_gpus, r.duration_s) for r in rs.records] == [
        ("jA_uX", 8, 7200.0),
        ("jC_uY", 2, 1800.0),
    ]
    assert rs.records[1].arrival_s - rs.records[0].arrival_s == 82.0
    assert reasons(rs) == {3: "gpu_num: 0 (a CPU job)", 5: "duration: '0': the job never ran"}


def test_pai_fixture_sums_task_gpus():
    rs = read_pai_tables(PAI)
    assert [(r.job_id, r.num_gpus, r.duration_s, r.gpu_type) for r in rs.records] == [
        ("p1", 2, 3600.0, "v100-16gb"),  # 2 workers x 100% + a GPU-less parameter server
        ("p2", 1, 600.0, "t4"),  # a 50% share counts as one GPU
    ]
    assert reasons(rs) == {
        3: "plan_gpu: no GPU in any task (a CPU job)",
        4: "end_time: blank (the job had not ended when the trace was cut)",
    }


@pytest.mark.parametrize(
    ("path", "fmt"),
    [(GENERIC, "csv"), (PHILLY, "philly"), (HELIOS, "helios"), (PAI, "pai")],
)
def test_detection(path, fmt):
    assert detect_format(path) == fmt
    assert read_records(path, fmt, MODELS, GPUS).source_format == fmt


def test_detection_of_arena_and_of_nothing(tmp_path):
    arena = write(tmp_path, "job_id,submission_time,num_iteration,model_name,batch_size\n")
    assert detect_format(arena) == "arena"
    with pytest.raises(InputFileError, match="cannot tell the trace format") as info:
        detect_format(write(tmp_path, "a,b,c\n1,2,3\n", "other.csv"))
    assert "other.csv" in str(info.value) and "philly" in str(info.value)


# --- malformed rows: every one names its line and field -----------------------------------------


def test_generic_csv_malformed_rows(tmp_path):
    path = write(
        tmp_path,
        "job_id,arrival_s,num_gpus,duration_s,iterations,gpu_type,model,batch_size,deadline_s\n"
        "ok,0,1,60,,,,,\n"
        "a,x,1,60,,,,,\n"
        "b,0,0,60,,,,,\n"
        "c,0,1,,,,,,\n"
        "d,0,1,-5,,,,,\n"
        "e,0,1,60,,b200,,,\n"
        "f,0,1,60,,,,64,\n"
        "g,10,1,60,,,,,5\n"
        "h,0,1.5,60,,,,,\n"
        "ok,0,1,60,,,,,\n"
        "i,0,1,60,,,,,,extra\n",
    )
    rs = read_generic_csv(path, MODELS, GPUS)
    assert [r.job_id for r in rs.records] == ["ok"]
    assert reasons(rs) == {
        3: "arrival_s: 'x' is not a number",
        4: "num_gpus: '0' must be positive",
        5: "duration_s: blank, and so is iterations: give one of them",
        6: "duration_s: '-5' must be positive",
        7: "gpu_type: unknown GPU type 'b200'",
        8: "batch_size: given without a model",
        9: "deadline_s: '5' is before arrival_s",
        10: "num_gpus: '1.5' must be an integer",
        11: "job_id: duplicate 'ok' (first on line 2)",
        12: "row has 10 fields, header has 9",
    }


def test_generic_csv_missing_column_and_no_rows(tmp_path):
    with pytest.raises(InputFileError) as info:
        read_generic_csv(write(tmp_path, "arrival_s,gpus\n0,1\n"), MODELS, GPUS)
    assert info.value.field == "num_gpus" and "trace.csv" in str(info.value)
    bad = write(tmp_path, "arrival_s,num_gpus,duration_s\n-1,1,60\n", "bad.csv")
    with pytest.raises(InputFileError, match=r"no usable rows \(1 skipped: line 2: arrival_s"):
        read_generic_csv(bad, MODELS, GPUS)


def test_philly_malformed_entries(tmp_path):
    ok = {
        "jobid": "ok",
        "submitted_time": "2017-10-03 02:57:58",
        "attempts": [
            {
                "start_time": "2017-10-03 02:58:00",
                "end_time": "2017-10-03 03:58:00",
                "detail": [{"ip": "m", "gpus": ["g0"]}],
            }
        ],
    }
    entries = [
        ok,
        "not an object",
        {**ok, "jobid": 7},
        {**ok, "jobid": "t", "submitted_time": "03/10/2017"},
        {**ok, "jobid": "n", "attempts": [{**ok["attempts"][0], "detail": [{"ip": "m"}]}]},
        {**ok, "jobid": "z", "attempts": [{**ok["attempts"][0], "detail": []}]},
        {
            **ok,
            "jobid": "r",
            "attempts": [{**ok["attempts"][0], "end_time": ok["attempts"][0]["start_time"]}],
        },
        ok,
    ]
    rs = read_philly_job_log(write(tmp_path, json.dumps(entries), "log.json"))
    assert [r.job_id for r in rs.records] == ["ok"]
    assert reasons(rs) == {
        2: "entry: expected a JSON object, got str",
        3: "jobid: missing or not a string",
        4: "submitted_time: '03/10/2017' is not a timestamp like '2020-04-01 00:05:38'",
        5: "attempts[0].detail.gpus: expected a list of GPU names",
        6: "attempts.detail.gpus: no GPU in any attempt (a CPU job)",
        7: "attempts.end_time: run time 0 s is not positive",
        8: "job_id: duplicate 'ok' (first on line 1)",
    }


def test_philly_not_json_or_not_a_list(tmp_path):
    with pytest.raises(InputFileError, match="not JSON") as info:
        read_philly_job_log(write(tmp_path, '[{"jobid": }', "log"))
    assert info.value.row == 1
    with pytest.raises(InputFileError, match="expected a JSON list"):
        read_philly_job_log(write(tmp_path, '{"jobid": "a"}', "log2"))


def test_helios_malformed_rows(tmp_path):
    path = write(
        tmp_path,
        "job_id,user,gpu_num,submit_time,duration\n"
        "a,u,1,2020-04-01 00:00:00,60\n"
        "b,u,x,2020-04-01 00:00:00,60\n"
        "c,u,1.5,2020-04-01 00:00:00,60\n"
        "d,u,1,yesterday,60\n"
        "e,u,1,2020-04-01 00:00:00,\n"
        "f,u,1,2020-04-01 00:00:00,-3\n"
        "g,u,1,nan,60\n",
    )
    rs = read_helios_log(path)
    assert [r.job_id for r in rs.records] == ["a_u"]
    assert reasons(rs) == {
        3: "gpu_num: 'x' is not a number",
        4: "gpu_num: '1.5' must be an integer >= 0",
        5: "submit_time: 'yesterday' is not a timestamp like '2020-04-01 00:05:38'",
        6: "duration: required value is blank",
        7: "duration: '-3': the job never ran",
        8: "submit_time: 'nan' is not a finite number",
    }
    with pytest.raises(InputFileError) as info:
        read_helios_log(write(tmp_path, "job_id,gpu_num,submit_time\n", "h.csv"))
    assert info.value.field == "duration"


def test_pai_malformed_rows_and_missing_task_table(tmp_path):
    jobs = write(
        tmp_path,
        "job_name,inst_id,user,status,start_time,end_time\n"  # a header line is allowed
        "a,i,u,Terminated,0,60\n"
        "b,i,u,Terminated,x,60\n"
        "c,i,u,Terminated,0,60\n"
        "d,i,u,Terminated,0,60\n"
        "e,i,u,Terminated,100,50\n",
        "pai_job_table.csv",
    )
    write(
        tmp_path,
        "a,w,1,T,0,60,1,1,100,T4\nc,w,1,T,0,60,1,1,-100,T4\nc,w2,1,T,0,60,1,1,100,T4\n"
        "e,w,1,T,0,60,1,1,100,T4\n",
        "pai_task_table.csv",
    )
    rs = read_pai_tables(jobs)
    assert [r.job_id for r in rs.records] == ["a"]
    assert reasons(rs) == {
        3: "start_time: 'x' is not a number",
        4: "task: pai_task_table.csv line 2: plan_gpu: '-100' must be >= 0",
        5: "job_name: 'd' has no task in pai_task_table.csv",
        6: "end_time: run time -50 s is not positive",
    }
    (tmp_path / "solo").mkdir()
    lonely = write(tmp_path / "solo", "a,i,u,T,0,1\n", "pai_job_table_x.csv")
    with pytest.raises(FileNotFoundError, match=r"pai_task_table_x\.csv"):
        read_pai_tables(lonely)


# --- the mapping --------------------------------------------------------------------------------


def fixed_timer(model, global_batch, num_gpus, gpu_type):
    """One iteration = 1 s per 128 samples per GPU; nothing above 16 GPUs fits."""
    return None if num_gpus > 16 else global_batch / 128.0 / num_gpus


def test_mapping_keeps_counts_and_durations():
    rs = read_helios_log(HELIOS)
    trace = map_records(rs, fixed_timer, TYPES)
    assert [j.arrival_s for j in trace.jobs] == [0.0, 82.0]
    for job, record in zip(trace.jobs, rs.records, strict=True):
        assert job.requested_gpus == record.num_gpus
        assert job.requested_gpu_type in TYPES
        seconds = fixed_timer(job.model, job.global_batch, job.requested_gpus, None)
        assert abs(job.iterations * seconds - record.duration_s) <= seconds / 2
    assert [i.line for i in trace.skipped] == [3, 5]


def test_mapping_is_seeded():
    rs = read_philly_job_log(PHILLY)
    a = map_records(rs, fixed_timer, TYPES, JobMapping(seed=3))
    assert a == map_records(rs, fixed_timer, TYPES, JobMapping(seed=3))
    many = [map_records(rs, fixed_timer, TYPES, JobMapping(seed=s)) for s in range(8)]
    assert len({tuple((j.model.name, j.requested_gpu_type) for j in t.jobs) for t in many}) > 1


def test_mapping_uses_named_models_and_types_of_the_cluster():
    trace = map_records(read_generic_csv(GENERIC, MODELS, GPUS), fixed_timer, TYPES)
    by_id = {j.job_id: j for j in trace.jobs}
    assert by_id["g3"].model.name == "bert-760m"
    assert by_id["g1"].requested_gpu_type == "a100-40gb"  # the record's type, in the cluster
    assert by_id["g4"].deadline_s == 9000.0 - 100.0


def test_mapping_skips_a_job_that_fits_nowhere(tmp_path):
    path = write(tmp_path, "arrival_s,num_gpus,duration_s\n0,64,60\n5,1,60\n")
    trace = map_records(read_generic_csv(path, MODELS, GPUS), fixed_timer, TYPES)
    assert [j.requested_gpus for j in trace.jobs] == [1]
    assert trace.jobs[0].arrival_s == 0.0  # rebased on the first job, not the skipped row
    assert trace.skipped[0].line == 2 and trace.skipped[0].reason.startswith("num_gpus: none of")
    alone = write(tmp_path, "arrival_s,num_gpus,duration_s\n0,64,60\n", "alone.csv")
    with pytest.raises(InputFileError, match=r"alone\.csv.*no usable rows"):
        map_records(read_generic_csv(alone, MODELS, GPUS), fixed_timer, TYPES)


def test_mapping_config_is_validated():
    with pytest.raises(ConfigError, match="max_draws"):
        JobMapping(max_draws=0)
    with pytest.raises(ConfigError, match="seed"):
        JobMapping(seed=-1)
