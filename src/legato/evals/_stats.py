"""Confidence intervals of pass rates: Wilson's for independent runs, clustered for repeats.

Repeats of one case are not independent draws: a case the agent cannot do fails on every
repeat. Counting its ten failed repeats as ten observations would make the interval look
ten times better informed than it is. So an evaluation's interval treats the case as the
unit: the mean of the cases' pass rates, with a Student-t interval from the spread between
cases, and never narrower than Wilson's interval on the number of cases (which keeps it
honest when every case agrees with itself and the spread is zero).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["Interval", "clustered_interval", "t_quantile", "wilson"]

Interval = tuple[float, float]
"""(low, high), both in [0, 1]."""

Z95 = 1.959963984540054
"""The standard normal's 97.5th percentile (a two-sided 95% interval)."""

# Student's t, 97.5th percentile, for 1..30 degrees of freedom.
_T95 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_quantile(df: int) -> float:
    """The 97.5th percentile of Student's t with `df` degrees of freedom (normal above 30)."""
    if df < 1:
        return math.inf
    return _T95[df - 1] if df <= len(_T95) else Z95


def wilson(successes: float, n: float, z: float = Z95) -> Interval:
    """Wilson's score interval of a proportion (95% by default); (0, 1) when n is 0."""
    if n <= 0:
        return (0.0, 1.0)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return (max(0.0, centre - half), min(1.0, centre + half))


def clustered_interval(case_rates: Sequence[float]) -> Interval:
    """A 95% interval of the mean pass rate when each case contributes its own rate.

    The wider of the Student-t interval on the cases' rates and Wilson's interval on the
    number of cases; (0, 1) with no case.
    """
    k = len(case_rates)
    if k == 0:
        return (0.0, 1.0)
    mean = statistics.fmean(case_rates)
    low, high = wilson(mean * k, k)
    if k >= 2:
        half = t_quantile(k - 1) * statistics.stdev(case_rates) / math.sqrt(k)
        low, high = min(low, mean - half), max(high, mean + half)
    return (max(0.0, low), min(1.0, high))
