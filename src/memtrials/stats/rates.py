"""An interval for the mean of several units' rates (*Lessons from Luck*, section 4,
"Panel averages": "the panel's cell rates average the endpoints' rates").

The reported rate is ``p = mean_k(x_k / n_k)`` over the units with answers.  Its variance,
given the units, is ``v = sum_k p_k (1 - p_k) / n_k / K^2``.  The interval is Wilson's score
interval at the effective sample size ``n_eff = p (1 - p) / v`` (the sample size at which a
single binomial rate would have that variance; Korn and Graubard 1998 for weighted
proportions), so it is centred on the reported rate's scale, stays inside [0, 1] and keeps
Wilson's behaviour near 0.  When ``v = 0`` (every unit at 0 or every unit at 1) the
effective size is ``K^2 / sum_k 1 / n_k``, the value it takes when all units share one rate.
With one unit it is that unit's Wilson interval.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
from scipy import stats as _st

from memtrials.stats.intervals import Interval


def wilson_at(p: float, n: float, level: float = 0.95) -> tuple[float, float]:
    """Wilson's score interval for a rate ``p`` observed on (possibly fractional) ``n``."""
    z = float(_st.norm.ppf(1.0 - (1.0 - level) / 2.0))
    denom = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(max(p * (1 - p), 0.0) / n + z * z / (4 * n * n)) / denom
    lo = 0.0 if p <= 0.0 else max(0.0, centre - half)
    hi = 1.0 if p >= 1.0 else min(1.0, centre + half)
    return lo, hi


def mean_of_rates(events: Sequence[int], trials: Sequence[int], level: float = 0.95) -> Interval:
    """The mean of the units' rates ``events / trials`` (units with no trials left out) with
    the effective-size Wilson interval of the module docstring; ``n`` counts the units."""
    x = np.asarray(events, dtype=float)
    n = np.asarray(trials, dtype=float)
    if x.shape != n.shape or (x < 0).any() or (x > n).any():
        raise ValueError(f"mean_of_rates: need 0 <= events <= trials per unit, got {list(x)} / {list(n)}")
    keep = n > 0
    x, n = x[keep], n[keep]
    k = int(keep.sum())
    if k == 0:
        return Interval(math.nan, math.nan, math.nan, 0)
    rates = x / n
    p = float(rates.mean())
    v = float((rates * (1 - rates) / n).sum()) / k ** 2
    n_eff = p * (1 - p) / v if v > 0 else k ** 2 / float((1.0 / n).sum())
    lo, hi = wilson_at(p, n_eff, level)
    return Interval(p, lo, hi, k)
