"""Intervals for means and rates.

The Student-t interval follows the registered rule of *Lessons from Luck* (section 4,
"Inference"): mean +- t quantile x standard error, except that a sample whose values
all equal ``v`` on the quantity's support ``[a, b]`` gets the degenerate interval
``[v - (v - a) q, v + (b - v) q]`` with ``q = 1 - (alpha/2)^(1/n)`` (``0.025^(1/n)`` at
95 %), so that an estimate of exactly zero can still carry a non-zero interval.
Wilson's score interval is used for every cell rate; the difference of two independent
rates takes Newcombe's hybrid score interval (built from the two Wilson intervals;
statsmodels' ``confint_proportions_2indep``, method ``newcomb``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as _st

Support = tuple[float, float]


@dataclass(frozen=True)
class Interval:
    """A point estimate with a two-sided interval; ``degenerate`` marks the constant-sample rule."""

    estimate: float
    lo: float
    hi: float
    n: int
    degenerate: bool = False

    def contains(self, value: float) -> bool:
        return self.lo <= value <= self.hi


def as_values(values: Sequence[float] | np.ndarray, name: str = "values") -> np.ndarray:
    """``values`` as a flat float array; refused if any is NaN (complete cases only)."""
    arr = np.asarray(values, dtype=float).ravel()
    if np.isnan(arr).any():
        raise ValueError(f"{name}: contains NaN; pass complete cases only (drop missing worlds first)")
    return arr


def check_support(arr: np.ndarray, support: Support) -> None:
    """Refuse a support ``[a, b]`` with ``a >= b`` or values outside it (1e-12 slack)."""
    a, b = support
    if not a < b:
        raise ValueError(f"support {support!r}: lower end must be below upper end")
    if arr.size and (arr.min() < a - 1e-12 or arr.max() > b + 1e-12):
        raise ValueError(
            f"values lie outside the declared support [{a}, {b}] "
            f"(min {arr.min()}, max {arr.max()}); declare the quantity's true support"
        )


def degenerate_interval(v: float, n: int, support: Support, level: float = 0.95) -> Interval:
    """The registered interval for ``n`` values that all equal ``v`` on ``support``."""
    if n < 1:
        raise ValueError("degenerate_interval: n must be at least 1")
    a, b = support
    q = 1.0 - ((1.0 - level) / 2.0) ** (1.0 / n)
    return Interval(float(v), float(v - (v - a) * q), float(v + (b - v) * q), n, True)


def t_interval(values: Sequence[float] | np.ndarray, support: Support, level: float = 0.95) -> Interval:
    """Mean with its Student-t interval; the degenerate rule for a constant sample.

    ``values`` are the per-unit (per-world) values on complete cases; ``support`` is the
    quantity's support ``[a, b]`` (needed by the degenerate rule and checked).  An empty
    sample gives NaN bounds with ``n = 0``.
    """
    arr = as_values(values)
    check_support(arr, support)
    n = arr.size
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    mean = float(arr.mean())
    if np.all(arr == arr[0]):  # includes n == 1
        return degenerate_interval(float(arr[0]), n, support, level)
    se = float(arr.std(ddof=1)) / math.sqrt(n)
    tq = float(_st.t.ppf(1.0 - (1.0 - level) / 2.0, n - 1))
    return Interval(mean, mean - tq * se, mean + tq * se, n, False)


def t_test_pvalue(values: Sequence[float] | np.ndarray, null: float = 0.0) -> float:
    """Two-sided one-sample t-test p-value of ``mean == null``.

    For a constant sample (no variance) the test is decided exactly: p = 1 when the
    constant equals ``null`` and p = 0 otherwise.  Fewer than one value gives NaN.
    """
    arr = as_values(values)
    n = arr.size
    if n == 0:
        return math.nan
    if np.all(arr == arr[0]):
        return 1.0 if arr[0] == null else 0.0
    return float(_st.ttest_1samp(arr, null).pvalue)


def wilson_interval(k: int, n: int, level: float = 0.95) -> Interval:
    """Wilson score interval for ``k`` events in ``n`` trials (NaN bounds when n = 0)."""
    if n < 0 or k < 0 or k > n:
        raise ValueError(f"wilson_interval: need 0 <= k <= n, got k={k}, n={n}")
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    z = float(_st.norm.ppf(1.0 - (1.0 - level) / 2.0))
    p = k / n
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # the bounds are exactly 0 (k = 0) and 1 (k = n); floating point leaves ~1e-17 off
    lo = 0.0 if k == 0 else max(0.0, centre - half)
    hi = 1.0 if k == n else min(1.0, centre + half)
    return Interval(p, lo, hi, n)


def rate_difference(k1: int, n1: int, k0: int, n0: int, level: float = 0.95) -> Interval:
    """``k1/n1 - k0/n0`` of two independent binomial samples with Newcombe's hybrid score
    interval (Newcombe 1998, method 10; NaN when either sample is empty)."""
    for k, n in ((k1, n1), (k0, n0)):
        if n < 0 or k < 0 or k > n:
            raise ValueError(f"rate_difference: need 0 <= k <= n, got k={k}, n={n}")
    if n1 == 0 or n0 == 0:
        return Interval(math.nan, math.nan, math.nan, n1 + n0)
    from statsmodels.stats.proportion import confint_proportions_2indep

    lo, hi = confint_proportions_2indep(k1, n1, k0, n0, method="newcomb", compare="diff", alpha=1.0 - level)
    return Interval(k1 / n1 - k0 / n0, float(lo), float(hi), n1 + n0)
