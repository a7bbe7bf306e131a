"""Exceptions raised on bad input.

Every error about user input names where the problem is: the file, the row or key, and the field,
so that a researcher can fix a trace or scenario without reading the library's code.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from pathlib import Path


class CriusGymError(Exception):
    """Base class of every error raised by crius_gym on bad input."""


class UnknownNameError(CriusGymError, KeyError):
    """A name (GPU type, model, policy, scenario) is not in its catalogue or registry."""

    def __init__(self, kind: str, name: str, choices: Iterable[str]) -> None:
        self.kind = kind
        self.name = name
        self.choices = sorted(choices)
        # "known: …" rather than "known {kind}s": kinds do not all take an -s plural.
        super().__init__(f"unknown {kind} {name!r}; known: {', '.join(self.choices)}")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class InputFileError(CriusGymError, ValueError):
    """A data file (trace, measurement table, scenario) is malformed.

    Attributes:
        path: the file.
        row: 1-based line number in the file (header = line 1), or None for a whole-file problem.
        field: the column or key at fault, or None.
        message: what is wrong, without the place.
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
        self.message = message
        where = self.path
        if row is not None:
            where += f", line {row}"
        if field is not None:
            where += f", field {field!r}"
        super().__init__(f"{where}: {message}")


class ConfigError(CriusGymError, ValueError):
    """A configuration value is invalid (raised by frozen config dataclasses on construction)."""


class RunStateError(CriusGymError, RuntimeError):
    """A training run folder cannot be started or resumed as asked.

    Raised when a new run would overwrite a folder, or a resume finds nothing to resume.
    """


@contextlib.contextmanager
def utf8_text(path: str | Path) -> Iterator[None]:
    """Report a file that is not UTF-8 as an :class:`InputFileError`.

    The error names the file and the line of its first byte that is not UTF-8.

    Example:
        >>> with utf8_text(p), open(p, encoding="utf-8") as fh:  # doctest: +SKIP
        ...     rows = list(csv.reader(fh))
    """
    try:
        yield
    except UnicodeDecodeError as exc:
        line = None
        with contextlib.suppress(OSError):
            raw = Path(path).read_bytes()
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as whole:
                line = raw[: whole.start].count(b"\n") + 1
        raise InputFileError(
            path, f"not UTF-8 text ({exc.reason}); save the file as UTF-8", row=line
        ) from exc
