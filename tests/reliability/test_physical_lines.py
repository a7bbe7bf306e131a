"""Positions are physical (issue 37, item 1, for the CSV readers): an error names the line an
editor shows, whatever comments, blank lines or quoted multi-line fields come before the row
(crius_gym/csvlines.py)."""

from __future__ import annotations

import io

import pytest

from crius_gym.csvlines import records_with_lines
from crius_gym.errors import InputFileError
from crius_gym.hardware.gpus import load_gpu_catalog
from crius_gym.perf.measurements import COLUMNS, read_measurements, write_measurements_csv
from crius_gym.workload.formats.generic import read_generic_csv
from crius_gym.workload.models import load_model_catalog
from tests.perf.test_measurements import GOOD

# The file: line 1 a comment, 2 the header, 3 blank, 4 a comment between rows, 5 a row, 6-8 a
# row whose quoted `source` spans three lines (one starting with '#': data, not a comment),
# 9 the row under test.


def _measurements(tmp_path, bad: dict[str, str]) -> tuple[str, int]:
    plain = tmp_path / "plain.csv"
    write_measurements_csv([GOOD, {**GOOD, "source": "a\n# not a comment\nb"}, bad], plain)
    header, first, multi, last = _split_records(plain.read_text(encoding="utf-8"))
    text = "# a leading comment\n" + header + "\n# between rows\n" + first + multi + last
    path = tmp_path / "m.csv"
    path.write_text(text, encoding="utf-8")
    line = text[: text.index(last)].count("\n") + 1
    return str(path), line


def _split_records(text: str) -> list[str]:
    out, buf, quoted = [], "", False
    for ch in text:
        buf += ch
        if ch == '"':
            quoted = not quoted
        if ch == "\n" and not quoted:
            out.append(buf)
            buf = ""
    return out


@pytest.mark.parametrize(
    ("change", "field"),
    [({"gpu_type": "k80"}, "gpu_type"), ({"measured_iter_time_s": "-1"}, "measured_iter_time_s")],
)
def test_measurement_errors_name_the_physical_line(tmp_path, change, field):
    path, line = _measurements(tmp_path, {**GOOD, **change})
    assert line == 9
    with pytest.raises(InputFileError) as err:
        read_measurements(path)
    assert (err.value.row, err.value.field) == (line, field)
    assert f"line {line}" in str(err.value)


def test_measurement_rows_keep_their_physical_lines(tmp_path):
    path, line = _measurements(tmp_path, {**GOOD, "source": "the last row"})
    rows = read_measurements(path)
    assert [r.line for r in rows] == [5, 6, 9] and line == 9
    assert rows[1].source == "a\n# not a comment\nb"
    assert len(COLUMNS) == len(rows[0].raw)


def test_trace_rows_are_reported_at_their_first_physical_line(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(
        "job_id,arrival_s,num_gpus,duration_s,iterations,gpu_type,model,batch_size,deadline_s\n"
        "\n"
        '"a\nb",0,1,60,,,,,\n'  # a job id over two lines
        "x,zero,1,60,,,,,\n",
        encoding="utf-8",
    )
    records = read_generic_csv(path, load_model_catalog(), load_gpu_catalog())
    assert [i.line for i in records.skipped] == [5]
    assert [r.line for r in records.records] == [3]


def test_records_with_lines_counts_every_kind_of_line():
    text = '# c\na,b\n\n# mid\n1,"x\n#y\nz"\n2,3\n   \n4,5\n'
    got = list(records_with_lines(io.StringIO(text, newline=""), comments=True))
    assert [line for line, _ in got] == [2, 5, 8, 10]
    assert got[1][1] == ["1", "x\n#y\nz"]


def test_converters_of_the_public_tables_name_the_physical_line(
    tmp_path, arena_measurements, arena_model_configs, megatron_table1
):
    """The two public tables' converters (issue 37, item 1): a bad row behind a comment and a
    blank line is reported at the line an editor shows, not counted from the first data row."""
    from crius_gym.perf.public_tables import (
        convert_arena,
        convert_megatron_table1,
        rows_to_measurements,
    )

    lines = megatron_table1.read_text(encoding="utf-8").splitlines(keepends=True)
    header = next(i for i, text in enumerate(lines) if not text.startswith("#"))
    bad = lines[header + 2].replace(",", ",-", 1)  # a negative first numeric field
    text = [*lines[: header + 2], "\n", "# a note\n", bad, *lines[header + 3 :]]
    path = tmp_path / "megatron.csv"
    path.write_text("".join(text), encoding="utf-8")
    want = header + 2 + 3  # 1-based: the bad row's physical line
    with pytest.raises(InputFileError) as err:
        rows_to_measurements(convert_megatron_table1(path), path)
    assert err.value.row == want, err.value

    lines = arena_measurements.read_text(encoding="utf-8").splitlines(keepends=True)
    family = lines[0].split(",").index("model_size")
    fields = lines[3].split(",")
    fields[family] = "no-such-size"
    text = [lines[0], "# a comment\n", "\n", *lines[1:3], ",".join(fields), *lines[4:]]
    path = tmp_path / "arena.csv"
    path.write_text("".join(text), encoding="utf-8")
    with pytest.raises(InputFileError) as err:
        convert_arena(path, arena_model_configs)
    assert err.value.row == 6 and err.value.field == "model_size", err.value
