"""The fixed-bet test of a bounded mean (*Lessons from Luck*, section 4, "Inference").

For H0: the mean of the units' expected values is at most ``m`` (units independent and
bounded in ``[a, b]``, not necessarily identically distributed), rescale the values to
``y = (x - a) / (b - a)`` and the null to ``m' = (m - a) / (b - a)``.  The terminal
wealth ``K = prod_w (1 + lam (y_w - m'))`` of one fixed bet ``lam = c / m'`` (registered
``c = 0.75``) has ``E[K] <= 1`` under H0, so ``p = min(1, 1 / K)`` by Markov's
inequality (Waudby-Smith & Ramdas 2024; Shafer 2021).  A mean of *at least* ``m`` is
tested with the values and the null negated.
"""

from __future__ import annotations

import math
from typing import Literal, Sequence

import numpy as np

from memtrials.stats.intervals import Support, as_values, check_support

Alternative = Literal["greater", "less"]


def betting_wealth(
    values: Sequence[float] | np.ndarray,
    support: Support,
    null: float,
    alternative: Alternative = "greater",
    bet: float = 0.75,
) -> float:
    """Terminal wealth ``K`` of the fixed bet against the null (see module docstring).

    ``alternative="greater"`` tests H0: mean <= ``null``; ``"less"`` tests H0: mean >= ``null``.
    """
    arr = as_values(values)
    check_support(arr, support)
    a, b = support
    if alternative == "greater":
        y = (arr - a) / (b - a)
        m = (null - a) / (b - a)
    elif alternative == "less":
        # negate values and null: support becomes [-b, -a]
        y = (b - arr) / (b - a)
        m = (b - null) / (b - a)
    else:
        raise ValueError(f"alternative must be 'greater' or 'less', got {alternative!r}")
    if not 0.0 < m < 1.0:
        raise ValueError(
            f"null {null} must lie strictly inside the support ({a}, {b}) for a fixed bet"
        )
    if not 0.0 < bet < 1.0:
        raise ValueError(f"bet {bet} must lie in (0, 1) so that wealth stays positive")
    lam = bet / m
    factors = 1.0 + lam * (y - m)
    # log-sum avoids overflow/underflow for long samples
    return float(math.exp(np.log(factors).sum())) if factors.size else 1.0


def betting_pvalue(
    values: Sequence[float] | np.ndarray,
    support: Support,
    null: float = 0.0,
    alternative: Alternative = "greater",
    bet: float = 0.75,
) -> float:
    """One-sided betting p-value ``min(1, 1/K)``; NaN for an empty sample."""
    arr = as_values(values)
    if arr.size == 0:
        return math.nan
    k = betting_wealth(arr, support, null, alternative, bet)
    return 1.0 if k <= 1.0 else min(1.0, 1.0 / k)
