"""Whole numbers read from text exactly, so that no reader changes a count silently.

``int(float(text))`` is how a reader usually takes a count, and it changes values without a
word: ``9007199254740993`` becomes ``9007199254740992`` (a float has 53 bits), and
``12.0000000000000001`` passes as the integer 12. :func:`parse_whole` reads the decimal text
exactly (:class:`decimal.Decimal`, which takes what ``float`` takes: ``4``, ``4.0``, ``4e3``,
``4_000``, surrounding blanks) and refuses what is not a whole number, or is too large for the
floats the simulator computes with (``tests/reliability/test_exact_counts.py``).
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

MAX_WHOLE = 2**53
"""The largest magnitude read: every integer up to it is exact as a float too."""


def parse_whole(text: str) -> int:
    """The integer ``text`` denotes, read exactly.

    Args:
        text: a number as written in a file (``"4"``, ``"4.0"``, ``"4e3"``).

    Returns:
        Its value.

    Raises:
        ValueError: not a number (``'x' is not a number``), not finite, larger in magnitude than
            2**53, or not whole (``'1.5' must be an integer``); the message quotes ``text``.
    """
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ValueError(f"{text!r} is not a number") from None
    if not value.is_finite():
        raise ValueError(f"{text!r} is not a finite number")
    if value.copy_abs() > MAX_WHOLE:  # copy_abs: abs() rounds to the context, overflowing 1E1000000
        raise ValueError(f"{text!r} is too large (at most 2**53 = {MAX_WHOLE})")
    if value != value.to_integral_value():
        raise ValueError(f"{text!r} must be an integer")
    return int(value)
