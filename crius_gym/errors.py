"""Exceptions raised on bad input.

Every error about user input names where the problem is: the file, the row or key, and the field,
so that a researcher can fix a trace or scenario without reading the library's code.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


class CriusGymError(Exception):
    """Base class of every error raised by crius_gym on bad input."""


class UnknownNameError(CriusGymError, KeyError):
    """A name (GPU type, model, policy, scenario) is not in its catalogue or registry."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.choices = sorted(choices)
        super().__init__(f"unknown {kind} {name!r}; known {kind}s: {', '.join(self.choices)}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class InputFileError(CriusGymError, ValueError):
    """A data file (trace, measurement table, scenario) is malformed.

    Attributes:
        path: the file.
        row: 1-based line number in the file (header = line 1), or None for a whole-file problem.
        field: the column or key at fault, or None.
    """

    def __init__(
        self,
        path: str | Path,
        message: str,
        *,
        row: int | None = None,
        field: str | None = None,
    ) -> None:
        self.path = str(path)
        self.row = row
        self.field = field
        where = self.path
        if row is not None:
            where += f", line {row}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")


class ConfigError(CriusGymError, ValueError):
    """A configuration value is invalid (raised by frozen config dataclasses on construction)."""
