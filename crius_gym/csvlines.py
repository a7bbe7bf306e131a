"""CSV records with the physical line an editor shows for each, whatever comes before them.

``csv.reader.line_num`` counts the lines read so far, so it gives a record's *last* line (a quoted
field may span several), and readers that filter comment lines before the csv module sees them
lose count altogether. :func:`records_with_lines` gives each record's *first* physical line, with
blank lines, ``#`` comment lines between records and multi-line quoted fields all counted, so
every CSV reader of the project reports errors where the user will find them
(``tests/reliability/test_physical_lines.py``).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator


def records_with_lines(
    lines: Iterable[str], *, comments: bool = False
) -> Iterator[tuple[int, list[str]]]:
    """``(first physical line, fields)`` of every non-blank CSV record, header included.

    Args:
        lines: the file's lines (a text file opened with ``newline=""``).
        comments: skip lines starting with ``#`` between records (inside a quoted field a
            ``#`` line is data).

    Yields:
        The 1-based line on which each record starts, and its fields (not stripped).
    """
    at = {"line": 0, "start": 0}

    def numbered() -> Iterator[str]:
        for number, text in enumerate(lines, start=1):
            at["line"] = number
            between = at["start"] == 0
            if between and comments and text.startswith("#"):
                yield "\n"  # an empty record, skipped below; the count stays physical
                continue
            if between and text.strip():
                at["start"] = number
            yield text

    for record in csv.reader(numbered()):
        start, at["start"] = at["start"], 0
        if not any(cell.strip() for cell in record):
            continue
        yield (start or at["line"]), record
