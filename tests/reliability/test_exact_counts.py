"""No silently changed value (issue 37, item 5): a count a reader accepts is the number the file
wrote, exactly; otherwise the reader names the line and field. ``int(float(text))`` fails this
for ``9007199254740993`` (read as ...992) and ``12.0000000000000001`` (read as 12)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crius_gym.errors import CriusGymError, InputFileError
from crius_gym.hardware.gpus import load_gpu_catalog
from crius_gym.perf.measurements import int_field
from crius_gym.wholenumbers import MAX_WHOLE, parse_whole
from crius_gym.workload.formats.generic import read_generic_csv
from crius_gym.workload.models import load_model_catalog

MODELS = load_model_catalog()
GPUS = load_gpu_catalog()


@pytest.mark.parametrize(
    ("text", "value"),
    [("4", 4), ("4.0", 4), ("4e3", 4000), (" 7 ", 7), ("1_000", 1000), ("-3", -3), ("0", 0)],
)
def test_whole_numbers_are_read_exactly(text: str, value: int) -> None:
    assert parse_whole(text) == value


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("9007199254740993", "too large"),
        ("1e400", "too large"),
        ("1E1000000", "too large"),  # beyond Decimal's exponent range: abs() overflowed
        ("-1E999999999", "too large"),
        ("1E-1000000", "must be an integer"),
        ("12.0000000000000001", "must be an integer"),
        ("1.5", "must be an integer"),
        ("nan", "not a finite number"),
        ("-inf", "not a finite number"),
        ("x", "not a number"),
        ("0x10", "not a number"),
        ("True", "not a number"),
    ],
)
def test_what_is_not_a_whole_number_says_why(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_whole(text)


def _spellings(value: int) -> st.SearchStrategy[str]:
    """Ways a file may write ``value`` or a number near it."""
    return st.sampled_from(
        [
            str(value),
            f"{value}.0",
            f"{value}.00000000000000001",
            f"{Decimal(value):E}",
            f" {value} ",
            f"{value}e0",
            f"{value / 3:.6f}",
        ]
    )


TOKENS = st.one_of(
    st.integers(min_value=-5, max_value=2**60).flatmap(_spellings),
    st.integers(min_value=2**53 - 2, max_value=2**53 + 2).flatmap(_spellings),
    st.text(alphabet="0123456789.eE+-_ ", min_size=1, max_size=12),
)


def _exact(token: str) -> Decimal | None:
    try:
        d = Decimal(token.strip())
    except ArithmeticError:
        return None
    return d if d.is_finite() else None


def _check_generic(tmp: Path, gpus: str, iterations: str) -> None:
    path = tmp / "t.csv"
    rows = ["job_id,arrival_s,num_gpus,iterations", "ok,0,1,10", f'j,5,"{gpus}","{iterations}"']
    path.write_text("\n".join(rows) + "\n")
    try:
        records = read_generic_csv(path, MODELS, GPUS)
    except CriusGymError:
        return  # only the good row 2 would be left: the set can still not be empty
    by_id = {r.job_id: r for r in records.records}
    if "j" not in by_id:
        (issue,) = [i for i in records.skipped if i.line == 3]
        # A blank iterations asks for duration_s instead, which this row leaves blank too.
        fields = ("num_gpus", "iterations") + (() if iterations.strip() else ("duration_s",))
        assert issue.reason.split(":")[0] in fields
        return
    job = by_id["j"]
    assert Decimal(job.num_gpus) == _exact(gpus)
    assert Decimal(job.iterations) == _exact(iterations)
    assert 1 <= job.num_gpus <= MAX_WHOLE and 1 <= job.iterations <= MAX_WHOLE


@settings(max_examples=200, deadline=None)
@given(gpus=TOKENS, iterations=TOKENS)
def test_a_generic_trace_keeps_its_counts_or_names_line_and_field(
    tmp_path_factory: pytest.TempPathFactory, gpus: str, iterations: str
) -> None:
    _check_generic(tmp_path_factory.mktemp("t"), gpus, iterations)


@pytest.mark.slow
@settings(max_examples=1000, deadline=None)
@given(gpus=TOKENS, iterations=TOKENS)
def test_a_generic_trace_keeps_its_counts_thousand_cases(
    tmp_path_factory: pytest.TempPathFactory, gpus: str, iterations: str
) -> None:
    _check_generic(tmp_path_factory.mktemp("t"), gpus, iterations)


@settings(max_examples=200, deadline=None)
@given(token=TOKENS)
def test_a_measurement_count_is_the_written_number_or_an_error(token: str) -> None:
    try:
        value = int_field(token, "m.csv", 7, "num_gpus")
    except InputFileError as exc:
        assert "m.csv" in str(exc) and "7" in str(exc) and "num_gpus" in str(exc)
        return
    assert Decimal(value) == _exact(token) and value >= 1
