"""Rows must be physically possible (issue 37, item 3): a measurement row whose plan cannot exist
on its GPUs is refused with the file, the physical line and the rule broken
(crius_gym/perf/measurements.py:_check_plan_fits); non-positive times and degrees were refused
already (tests/perf/test_measurements.py)."""

from __future__ import annotations

import pytest

from crius_gym.errors import InputFileError
from crius_gym.perf.measurements import read_measurements, write_measurements_csv
from tests.perf.test_measurements import GOOD


def _read(tmp_path, **change: str):
    path = tmp_path / "m.csv"
    write_measurements_csv([GOOD, {**GOOD, **change}], path)
    return path, read_measurements(path)


@pytest.mark.parametrize(
    ("change", "field", "rule"),
    [
        ({"gpus_per_node": "8", "tensor_parallel": "3"}, "tensor_parallel", "part of one node"),
        (
            {"num_nodes": "2", "gpus_per_node": "8", "tensor_parallel": "12"},
            "tensor_parallel",
            "whole nodes",
        ),
        (
            {"gpus_per_node": "8", "tensor_parallel": "2", "pipeline_parallel": "3"},
            "pipeline_parallel",
            "no whole data-parallel degree",
        ),
        ({"gpus_per_node": "2", "pipeline_parallel": "4"}, "pipeline_parallel", "does not divide"),
        ({"tensor_parallel": "0"}, "tensor_parallel", "positive integer"),
        ({"pipeline_parallel": "-2"}, "pipeline_parallel", "positive integer"),
        ({"microbatch_size": "1.5"}, "microbatch_size", "positive integer"),
    ],
)
def test_impossible_plans_are_refused_naming_line_field_and_rule(tmp_path, change, field, rule):
    path = tmp_path / "m.csv"
    write_measurements_csv([GOOD, {**GOOD, **change}], path)
    with pytest.raises(InputFileError, match=rule) as err:
        read_measurements(path)
    assert (err.value.path, err.value.row, err.value.field) == (str(path), 3, field)


@pytest.mark.parametrize(
    "change",
    [
        {"num_nodes": "2", "gpus_per_node": "8", "tensor_parallel": "16"},  # whole nodes
        {"num_nodes": "2", "gpus_per_node": "8", "tensor_parallel": "4", "pipeline_parallel": "2"},
        {"gpus_per_node": "8", "tensor_parallel": "8"},
    ],
)
def test_possible_plans_are_read(tmp_path, change):
    _, rows = _read(tmp_path, **change)
    assert rows[1].tensor_parallel == int(change["tensor_parallel"])
