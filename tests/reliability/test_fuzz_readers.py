"""Fuzzing every reader (issue 37, item 5): hostile files generated from random bytes and from
random edits of a valid file (lines deleted, duplicated and swapped, values replaced by wrong
types and huge, negative or non-finite numbers, truncation, other encodings). The only outcomes
allowed are a result or the project's own error (a ``CriusGymError``, which names the file and,
where there is one, the line and field); never another exception. 200 cases per reader in the
default suite, 1,000 in the slow one."""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crius_gym.errors import CriusGymError
from crius_gym.hardware.gpus import load_gpu_catalog
from crius_gym.perf.calibration import load_calibrations
from crius_gym.perf.measurements import read_measurements
from crius_gym.rl.ppo import resolve_hyperparams
from crius_gym.rl.saved import read_metadata
from crius_gym.scenarios import load_scenario
from crius_gym.workload.arena_trace import read_arena_trace
from crius_gym.workload.formats.generic import read_generic_csv
from crius_gym.workload.formats.helios import read_helios_log
from crius_gym.workload.formats.pai import read_pai_tables
from crius_gym.workload.formats.philly import read_philly_job_log
from crius_gym.workload.models import load_model_catalog

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "workload" / "fixtures"
MODELS = load_model_catalog()
GPUS = load_gpu_catalog()
_COUNTER = itertools.count()


def _metadata(path: Path) -> Any:
    model = path.parent / "best_model.zip"
    model.touch()
    return read_metadata(model)


def _pai(path: Path) -> Any:
    (path.parent / "pai_task_table.csv").write_bytes(
        (FIXTURES / "pai" / "pai_task_table.csv").read_bytes()
    )
    return read_pai_tables(path)


def _uncached(load: Callable[[str], Any]) -> Callable[[Path], Any]:
    def read(path: Path) -> Any:
        try:
            return load(str(path))
        finally:
            load.cache_clear()  # type: ignore[attr-defined]

    return read


# name: (a valid file, the name its copy needs, the reader)
READERS: dict[str, tuple[Path, str, Callable[[Path], Any]]] = {
    "scenario": (ROOT / "envs" / "tiny.yaml", "s.yaml", _uncached(load_scenario)),
    "agents": (ROOT / "agents" / "ppo.yaml", "ppo.yaml", lambda p: resolve_hyperparams("tiny", p)),
    "gpus": (ROOT / "crius_gym" / "data" / "gpus.yaml", "gpus.yaml", _uncached(load_gpu_catalog)),
    "models": (
        ROOT / "crius_gym" / "data" / "models.yaml",
        "models.yaml",
        _uncached(load_model_catalog),
    ),
    "calibration": (
        ROOT / "crius_gym" / "data" / "calibration.yaml",
        "calibration.yaml",
        _uncached(load_calibrations),
    ),
    "metadata": (
        ROOT / "results" / "reference_policy" / "metadata.yaml",
        "metadata.yaml",
        _metadata,
    ),
    "measurements": (
        ROOT / "crius_gym" / "data" / "published_runs.csv",
        "m.csv",
        lambda p: read_measurements(p, GPUS),
    ),
    "generic trace": (
        FIXTURES / "generic.csv",
        "trace.csv",
        lambda p: read_generic_csv(p, MODELS, GPUS),
    ),
    "philly log": (FIXTURES / "philly" / "cluster_job_log", "cluster_job_log", read_philly_job_log),
    "helios log": (
        FIXTURES / "helios" / "Venus" / "cluster_log.csv",
        "cluster_log.csv",
        read_helios_log,
    ),
    "pai tables": (FIXTURES / "pai" / "pai_job_table.csv", "pai_job_table.csv", _pai),
    "arena trace": (
        Path(os.environ.get("CRIUS_GYM_DATA", ROOT.parent / "shared" / "data"))
        / "arena"
        / "traces"
        / "simulate_trace_philly.csv",
        "arena.csv",
        lambda p: read_arena_trace(p, MODELS, GPUS),
    ),
}

HOSTILE_VALUES = st.sampled_from(
    [
        "",
        "-1",
        "0",
        "1e309",
        "-1e309",
        "nan",
        "inf",
        "99999999999999999999999",
        "x",
        "[",
        "{",
        "'",
        '"',
        ",",
        ":",
        "null",
        "true",
        "- a",
        "\t",
        "é",
        "\x00",
        "1.5",
        "-0",
    ]
)


@st.composite
def hostile(draw: st.DrawFn, valid: bytes) -> bytes:
    """Random bytes, or a valid file with random edits."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.binary(max_size=2000))
    lines = valid.decode("utf-8").split("\n")[:400]  # a large file: its head is enough
    for _ in range(draw(st.integers(1, 4))):
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        op = draw(st.sampled_from(["delete", "duplicate", "swap", "replace", "insert"]))
        if op == "delete":
            del lines[i]
        elif op == "duplicate":
            lines.insert(i, lines[i])
        elif op == "swap":
            j = draw(st.integers(0, len(lines) - 1))
            lines[i], lines[j] = lines[j], lines[i]
        elif op == "replace":  # a field or value of the line: what follows a separator
            line = lines[i]
            cuts = [k for k, ch in enumerate(line) if ch in ",:"]
            value = draw(HOSTILE_VALUES)
            if cuts:
                k = draw(st.sampled_from(cuts))
                rest = line[k + 1 :]
                end = min([rest.find(c) for c in ",}]" if c in rest] or [len(rest)])
                lines[i] = line[: k + 1] + " " + value + rest[end:]
            else:
                lines[i] = value
        else:
            lines.insert(i, draw(st.text(max_size=40)))
    text = "\n".join(lines)
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]  # truncated
    encoding = draw(st.sampled_from(["utf-8", "utf-8", "utf-8", "latin-1", "utf-16"]))
    return text.encode(encoding, errors="replace")


def _check(reader: str, data: st.DataObject, tmp_path: Path) -> None:
    source, name, read = READERS[reader]
    if not source.is_file():
        pytest.skip(f"{source} is absent (public data not here)")
    blob = data.draw(hostile(source.read_bytes()))
    folder = tmp_path / f"case{next(_COUNTER)}"
    folder.mkdir()
    path = folder / name
    path.write_bytes(blob)
    # A hang is a failure too: SIGALRM interrupts a reader stuck for HANG_S (the slowest
    # reader, a scenario with its catalogues, takes well under a second here).
    signal.signal(signal.SIGALRM, _hung)
    signal.alarm(HANG_S)
    try:
        read(path)
    except CriusGymError as err:  # the project's own error: allowed, if it names the file
        assert name in str(err), f"{reader}: the error does not name the file: {err}"
    finally:
        signal.alarm(0)


HANG_S = 20


class ReaderHungError(Exception):
    """Raised by the alarm: the reader ran for HANG_S seconds on one file."""


def _hung(signum: int, frame: object) -> None:
    raise ReaderHungError(f"a reader ran {HANG_S} s on one file")


FAST = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
SLOW = settings(FAST, max_examples=1000)


@pytest.mark.parametrize("reader", sorted(READERS))
@FAST
@given(data=st.data())
def test_hostile_files_give_a_result_or_the_projects_error(reader, data, tmp_path):
    _check(reader, data, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("reader", sorted(READERS))
@SLOW
@given(data=st.data())
def test_hostile_files_thousand_cases(reader, data, tmp_path):
    _check(reader, data, tmp_path)
