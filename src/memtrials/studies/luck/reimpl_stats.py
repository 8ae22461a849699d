"""The statistics of the luck study's independent re-implementation (:mod:`.reimpl`),
written from the paper's definitions (section 4, "Inference"), not from ``memtrials.stats``:
the fixed-bet p-value as a sum of ``log1p``, one sample's estimate, interval, t and betting
p-values and robustness (the t interval from ``scipy.stats.t.interval``, the degenerate rule
of a constant sample as the paper states it), and Holm's step-down written out.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np
from scipy import stats


def betting_p(v: np.ndarray, support: tuple[float, float], null: float, greater: bool, bet: float) -> float:
    """``min(1, 1/K)`` of the fixed bet ``bet / m'`` on values rescaled to [0, 1]; for a mean of
    at least ``null`` (``greater=False``) the values and the null are negated first."""
    a, b = support
    y, m = ((v - a) / (b - a), (null - a) / (b - a)) if greater else ((b - v) / (b - a), (b - null) / (b - a))
    log_k = float(np.log1p((bet / m) * (y - m)).sum())
    with np.errstate(over="ignore"):
        return float(min(1.0, np.exp(-log_k)))


def infer(v: np.ndarray, support: tuple[float, float], r: Mapping[str, Any]) -> dict[str, Any]:
    """Estimate, registered interval, t and betting p-values and robustness of one sample."""
    v = np.asarray(v, dtype=float)
    n = int(v.size)
    if n == 0:
        return dict(n=0, estimate=math.nan, lo=math.nan, hi=math.nan, degenerate=False, p_t=math.nan,
                    p_bet_pos=math.nan, p_bet_below=math.nan, robust_pos=False, robust_below=False)
    a, b = support
    mean = math.fsum(v) / n
    if np.unique(v).size == 1:  # every value equals v0: the registered degenerate interval
        v0 = float(v[0])
        q = 1.0 - ((1.0 - r["level"]) / 2.0) ** (1.0 / n)
        est, lo, hi, degenerate = v0, v0 - (v0 - a) * q, v0 + (b - v0) * q, True
        p_t = 1.0 if v0 == 0.0 else 0.0
    else:
        sem = float(np.std(v, ddof=1)) / math.sqrt(n)
        lo, hi = (float(x) for x in stats.t.interval(r["level"], n - 1, loc=mean, scale=sem))
        est, degenerate = mean, False
        p_t = float(2.0 * stats.t.sf(abs(mean / sem), n - 1))
    p_pos = betting_p(v, support, 0.0, True, r["bet"])
    p_below = betting_p(v, support, r["margin"], False, r["bet"])
    return dict(n=n, estimate=est, lo=lo, hi=hi, degenerate=degenerate, p_t=p_t, p_bet_pos=p_pos,
                p_bet_below=p_below, robust_pos=bool(lo > 0 and p_pos <= r["robust_alpha"]),
                robust_below=bool(hi < r["margin"] and p_below <= r["robust_alpha"]))


def holm_adjusted(ps: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of one family (a missing p-value counts as 1)."""
    p = [1.0 if (x is None or math.isnan(x)) else float(x) for x in ps]
    m, running, out = len(p), 0.0, [0.0] * len(p)
    for rank, i in enumerate(sorted(range(m), key=lambda j: p[j])):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out
