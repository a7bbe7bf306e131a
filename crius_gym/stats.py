"""Small statistics shared by training and evaluation."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats


def mean_ci(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """Mean and half-width of a Student-t confidence interval (NaN half-width for n < 2)."""
    a = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if len(a) == 0:
        return math.nan, math.nan
    if len(a) < 2:
        return float(a.mean()), math.nan
    half = stats.t.ppf(0.5 + confidence / 2, len(a) - 1) * a.std(ddof=1) / math.sqrt(len(a))
    return float(a.mean()), float(half)
