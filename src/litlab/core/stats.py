"""Seed-level statistics shared by every paper's study: the Student-t interval of a mean over seeds, and
the ``mean ± sd`` cells of the results tables."""

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


def mean_and_sd(values: Sequence[float]) -> tuple[float, float]:
    """(mean, sample standard deviation) over seeds; sd 0 for one value, which has no spread to report."""
    x = np.asarray(values, dtype=float)
    return float(x.mean()), float(x.std(ddof=1)) if len(x) > 1 else 0.0


def format_mean_sd(values: Sequence[float], digits: int = 2) -> str:
    """A table cell ``mean ± sd`` over the values that are not NaN: the mean alone for one, ``–`` for none."""
    finite = [float(v) for v in values if not math.isnan(v)]
    if not finite:
        return "–"
    mean, sd = mean_and_sd(finite)
    return f"{mean:.{digits}f}" + (f" ± {sd:.{digits}f}" if len(finite) > 1 else "")
