import csv

import pytest

from crius_gym.errors import InputFileError
from crius_gym.perf.measurements import COLUMNS, read_measurements, write_measurements_csv
from crius_gym.perf.public_tables import (
    LINE_KEY,
    convert_arena,
    convert_megatron_table1,
    rows_to_measurements,
)

GOOD = {
    "model_family": "bert",
    "model_name": "bert-small",
    "hidden_size": "1024",
    "num_layers": "4",
    "num_heads": "16",
    "seq_len": "512",
    "vocab_size": "30000",
    "dtype": "fp16",
    "global_batch": "64",
    "gpu_type": "a100",
    "num_nodes": "1",
    "gpus_per_node": "2",
    "framework": "alpa",
    "measured_iter_time_s": "1.5",
    "status": "ok",
    "split": "holdout",
}


def write(tmp_path, rows):
    path = tmp_path / "m.csv"
    write_measurements_csv(rows, path)
    return path


def test_round_trip(tmp_path):
    rows = read_measurements(
        write(tmp_path, [GOOD, {**GOOD, "status": "oom", "measured_iter_time_s": ""}])
    )
    assert [r.status for r in rows] == ["ok", "oom"]
    assert rows[0].gpu_type == "a100-40gb" and rows[0].layout.num_gpus == 2
    assert rows[0].measured_s == 1.5 and rows[1].measured_s is None
    assert rows[0].line == 2 and rows[1].line == 3


@pytest.mark.parametrize(
    ("change", "line_field"),
    [
        ({"gpu_type": "k80"}, "gpu_type"),
        ({"measured_iter_time_s": "fast"}, "measured_iter_time_s"),
        ({"measured_iter_time_s": "-1"}, "measured_iter_time_s"),
        ({"num_nodes": "0"}, "num_nodes"),
        ({"global_batch": ""}, "global_batch"),
        ({"status": "maybe"}, "status"),
        ({"hidden_size": "abc"}, "hidden_size"),
        ({"framework": "deepspeed"}, "framework"),
        ({"model_family": "cnn"}, "model_family"),
        ({"activation_recompute": "perhaps"}, "activation_recompute"),
    ],
)
def test_malformed_rows_name_file_line_and_field(tmp_path, change, line_field):
    path = write(tmp_path, [GOOD, {**GOOD, **change}])
    with pytest.raises(InputFileError) as err:
        read_measurements(path)
    assert err.value.row == 3
    assert err.value.field == line_field
    assert str(path) in str(err.value) and "line 3" in str(err.value)


def test_missing_columns_and_empty_file(tmp_path):
    p = tmp_path / "bad.csv"
    p.write_text("model_family,dtype\nbert,fp16\n")
    with pytest.raises(InputFileError, match="missing column"):
        read_measurements(p)
    p.write_text("")
    with pytest.raises(InputFileError, match="empty"):
        read_measurements(p)


def test_arena_converter(arena_measurements, arena_model_configs):
    rows = convert_arena(arena_measurements, arena_model_configs)
    with open(arena_measurements) as fh:
        n = sum(1 for _ in csv.DictReader(fh))
    assert len(rows) == n == 329
    assert set(rows[0]) - {LINE_KEY} <= set(COLUMNS)
    ms = rows_to_measurements(rows, arena_measurements)
    assert sum(m.status == "oom" for m in ms) == 11
    splits = [m.split for m in ms]
    assert 0.45 < splits.count("calibration") / len(splits) < 0.55
    wrn = [m for m in ms if m.model.family == "wide_resnet"]
    assert wrn and all(m.model.dtype == "fp32" for m in wrn)


def test_megatron_converter(megatron_table1):
    ms = rows_to_measurements(convert_megatron_table1(megatron_table1), megatron_table1)
    assert len(ms) == 10 and ms[0].line == 3  # a comment line precedes the header
    assert [m.split for m in ms] == ["calibration", "holdout"] * 5  # alternate rows
    assert ms[-1].pipeline_parallel == 64 and ms[-1].tensor_parallel == 8
    assert ms[-1].layout.num_gpus == 3072
