"""Seed-level statistics shared by every paper's study: the Student-t interval of a mean over seeds."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats


def mean_and_half_width(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float]:
    """(mean, half-width of the two-sided Student-t interval of the mean); half-width NaN below 2 values."""
    x = np.asarray(values, dtype=float)
    mean = float(x.mean()) if len(x) else math.nan
    if len(x) < 2:
        return mean, math.nan
    return mean, float(stats.t.ppf(0.5 + confidence / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
