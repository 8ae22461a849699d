"""Paired comparisons of two conditions on the same units (tasks, histories).

Used where every comparison is paired by task (*When History Fails to Become
Experience*: identical task lists and seeds across conditions).

- :func:`mcnemar_exact`: exact two-sided McNemar test of marginal homogeneity for paired
  binary outcomes (conditional binomial test on the discordant pairs).
- :func:`paired_bootstrap`: percentile interval of the mean paired difference, resampling
  units with replacement (seeded; reproducible).
- :func:`paired_difference`: both, for binary outcomes ``x`` (baseline) and ``y``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from scipy import stats as _st

from memtrials.stats.intervals import Interval


def _paired(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(x, dtype=float).ravel()
    b = np.asarray(y, dtype=float).ravel()
    if a.shape != b.shape:
        raise ValueError(f"paired samples differ in length ({a.size} vs {b.size}); pair them by unit first")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("paired samples contain NaN; drop incomplete pairs first")
    return a, b


def mcnemar_exact(x: Sequence[int] | np.ndarray, y: Sequence[int] | np.ndarray) -> float:
    """Exact two-sided McNemar p-value for paired 0/1 outcomes (1.0 with no discordant pair)."""
    a, b = _paired(x, y)
    if not np.isin(a, (0, 1)).all() or not np.isin(b, (0, 1)).all():
        raise ValueError("mcnemar_exact: outcomes must be 0/1 (or booleans)")
    n10 = int(((a == 1) & (b == 0)).sum())
    n01 = int(((a == 0) & (b == 1)).sum())
    n = n10 + n01
    if n == 0:
        return 1.0
    return float(min(1.0, _st.binomtest(min(n10, n01), n, 0.5).pvalue))


def paired_bootstrap(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray, *,
                     level: float = 0.95, n_boot: int = 4000, seed: int = 0) -> Interval:
    """Mean of ``y - x`` with a percentile interval from resampling the pairs."""
    a, b = _paired(x, y)
    d = b - a
    n = d.size
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    rng = np.random.default_rng(seed)
    means = np.empty(n_boot)
    chunk = max(1, 2_000_000 // n)
    for s in range(0, n_boot, chunk):
        k = min(chunk, n_boot - s)
        means[s:s + k] = d[rng.integers(0, n, size=(k, n))].mean(axis=1)
    alpha = 1.0 - level
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return Interval(float(d.mean()), float(lo), float(hi), n)


@dataclass(frozen=True)
class PairedDifference:
    """``y`` minus ``x`` for paired binary outcomes: the interval, McNemar's p, discordant counts."""

    diff: Interval
    p_mcnemar: float
    n10: int   # x success, y failure
    n01: int   # x failure, y success


def paired_difference(x: Sequence[int] | np.ndarray, y: Sequence[int] | np.ndarray, *,
                      level: float = 0.95, n_boot: int = 4000, seed: int = 0) -> PairedDifference:
    a, b = _paired(x, y)
    return PairedDifference(
        paired_bootstrap(a, b, level=level, n_boot=n_boot, seed=seed), mcnemar_exact(a, b),
        int(((a == 1) & (b == 0)).sum()), int(((a == 0) & (b == 1)).sum()))
