"""Every number has a range (issue 37, item 4): every numeric option of every script and console
entry point is range-checked at parse time (crius_gym.cli.Number), with an argparse error naming
the option and the allowed range. The test walks every script's parser, so an option added later
without a range fails here."""

from __future__ import annotations

import argparse
import contextlib
import io
import runpy
import sys
from pathlib import Path

import pytest

from crius_gym.cli import Number
from tests.conftest import REPO

# Every script (the console entry points crius-train, crius-evaluate, crius-baselines and
# crius-reproduce are the same code as experiments/train_ppo.py, evaluate.py, run_baselines.py
# and reproduce.py).
SCRIPTS = sorted(str(p.relative_to(REPO)) for p in (REPO / "experiments").glob("*.py"))


class _Captured(BaseException):  # not an Exception: no script's error handling catches it
    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser


def _parser(script: str, monkeypatch: pytest.MonkeyPatch) -> argparse.ArgumentParser:
    """The script's parser, captured when it is about to parse (nothing else runs)."""

    def capture(self: argparse.ArgumentParser, *args: object, **kwargs: object) -> None:
        raise _Captured(self)

    monkeypatch.setattr(argparse.ArgumentParser, "parse_args", capture)
    monkeypatch.setattr(argparse.ArgumentParser, "parse_known_args", capture)
    monkeypatch.setattr(sys, "argv", [script])
    try:
        runpy.run_path(str(REPO / script), run_name="__main__")
    except _Captured as got:
        return got.parser
    raise AssertionError(f"{script} did not parse any arguments")


def _numeric_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    out = []
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction | argparse._VersionAction):
            continue
        default = action.default
        numeric_default = isinstance(default, int | float) and not isinstance(default, bool)
        if action.type in (int, float) or isinstance(action.type, Number):
            out.append(action)
        elif numeric_default and action.nargs != 0 and action.type is None:
            out.append(action)  # a number parsed as a string: no range at parse time
    return out


def _bad_values(kind: Number) -> list[str]:
    bad = ["nan", "abc", ""]
    if not kind.allow_inf:
        bad += ["inf", "-inf"]
    if kind.low is not None:
        below = kind.low if kind.low_open else kind.low - 1
        bad.append(str(int(below)) if kind.kind is int else repr(float(below)))
        bad.append("-inf")
    if kind.high is not None:
        bad.append(str(int(kind.high) + 1) if kind.kind is int else repr(float(kind.high) * 2))
    if kind.kind is int:
        bad.append("1.5")
    return bad


def test_the_scripts_are_found():
    assert len(SCRIPTS) >= 19 and "experiments/train_ppo.py" in SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_numeric_option_has_a_range(script, monkeypatch):
    parser = _parser(script, monkeypatch)
    unchecked = [
        "/".join(a.option_strings) or a.dest
        for a in _numeric_actions(parser)
        if not isinstance(a.type, Number)
    ]
    assert not unchecked, f"{script}: numeric options without a range (crius_gym.cli.Number)"


@pytest.mark.parametrize("script", SCRIPTS)
def test_out_of_range_values_are_refused_naming_option_and_range(script, monkeypatch):
    parser = _parser(script, monkeypatch)
    monkeypatch.undo()  # parse for real from here on
    for action in _numeric_actions(parser):
        kind = action.type
        assert isinstance(kind, Number)
        opt = action.option_strings[-1] if action.option_strings else None
        for value in _bad_values(kind):
            err = io.StringIO()
            # --opt=value: argparse reads a separate "-inf" as an option of its own
            args = [f"{opt}={value}"] if opt else [value]
            with contextlib.redirect_stderr(err), pytest.raises(SystemExit) as stop:
                parser.parse_known_args(args)
            assert stop.value.code == 2, (script, opt, value)
            message = err.getvalue()
            assert f"argument {'/'.join(action.option_strings) or action.dest}" in message, (
                script,
                opt,
                value,
                message,
            )
            if value not in ("abc", ""):
                assert kind.describe() in message, (script, opt, value, message)
        ok = kind.low if kind.low is not None and not kind.low_open else 1
        assert kind(str(int(ok)) if kind.kind is int else str(float(ok))) == ok


@pytest.mark.parametrize(
    ("kind", "text", "value"),
    [
        (Number(int, 1), "3", 3),
        (Number(float, 0.0, low_open=True), "1e-9", 1e-9),
        (Number(float, 0.0, allow_inf=True), "inf", float("inf")),
        (Number(int, 0, 2**32 - 1), "4294967295", 2**32 - 1),
    ],
)
def test_values_in_range_are_kept(kind, text, value):
    assert kind(text) == value


@pytest.mark.parametrize(
    ("kind", "text"),
    [
        (Number(int, 1), "0"),
        (Number(float, 0.0, low_open=True), "0"),
        (Number(float, 0.0), "nan"),
        (Number(float, 0.0), "inf"),
        (Number(int, 0, 2**32 - 1), "4294967296"),
        (Number(int, 1), "2.0"),
    ],
)
def test_values_out_of_range_are_refused(kind, text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not"):
        kind(text)


def test_train_ppo_names_the_option_and_the_range(tmp_path):
    import subprocess

    done = subprocess.run(
        [sys.executable, "experiments/train_ppo.py", "--seed", "-1", "--out", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert "argument --seed: '-1' is not an integer >= 0 and <= 4294967295" in done.stderr
    assert not any(Path(tmp_path).iterdir())


def test_key_values_read_yaml_values_and_name_the_option_on_a_bad_item() -> None:
    from crius_gym.cli import key_values

    assert key_values(["a=1", "b=true", "c=x y", "a=2.5"], "--set") == {
        "a": 2.5,
        "b": True,
        "c": "x y",
    }
    for bad in ("nokey", "=1"):
        with pytest.raises(SystemExit, match=r"--policy-kwargs .*expected KEY=VALUE"):
            key_values([bad], "--policy-kwargs")
