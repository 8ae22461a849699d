"""The interval of the mean of the endpoints' rates: it contains the reported rate, equals
Wilson for one unit, and covers the true mean of rates at its level (simulation)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memtrials.stats import wilson_interval
from memtrials.stats.rates import mean_of_rates

LEVEL = 0.95


def coverage(p: np.ndarray, n: np.ndarray, reps: int, seed: int, fn) -> float:
    rng = np.random.default_rng(seed)
    truth = p.mean()
    hits = 0
    for _ in range(reps):
        iv = fn(rng.binomial(n, p), n)
        hits += iv.lo <= truth <= iv.hi
    return hits / reps


def test_one_unit_is_wilson_and_the_estimate_is_the_mean_of_rates():
    for k, n in ((0, 256), (3, 256), (128, 256), (256, 256)):
        a, b = mean_of_rates([k], [n]), wilson_interval(k, n)
        assert (a.estimate, a.lo, a.hi) == pytest.approx((b.estimate, b.lo, b.hi))
    iv = mean_of_rates([1, 30, 0], [10, 100, 0])  # the unit without answers is left out
    assert iv.n == 2 and iv.estimate == pytest.approx((0.1 + 0.3) / 2) and iv.lo < iv.estimate < iv.hi
    assert math.isnan(mean_of_rates([0], [0]).estimate)
    with pytest.raises(ValueError, match="events <= trials"):
        mean_of_rates([5], [4])


@pytest.mark.parametrize("p", [
    [0.004] * 11,                                                            # the paper's low cells
    [0.0, 0.0, 0.0, 0.02, 0.01, 0.26, 0.0, 0.39, 0.38, 0.38, 0.29],        # heterogeneous (RB adverse)
    [0.5] * 6,
])
def test_coverage_at_the_level(p):
    p = np.asarray(p)
    n = np.full(p.size, 256)
    reps = 1500
    cov = coverage(p, n, reps, 1, mean_of_rates)
    assert cov >= LEVEL - 3 * math.sqrt(LEVEL * (1 - LEVEL) / reps)
    assert cov <= 0.995  # not a vacuous interval


def test_pooled_wilson_is_not_an_interval_for_the_reported_rate():
    """Unequal answer counts: the pooled counts' Wilson interval is centred on the pooled
    rate, not on the mean of the rates, and misses the reported rate's truth."""
    p = np.array([0.30, 0.01, 0.01])
    n = np.array([40, 256, 256])
    reps = 1500

    def pooled(x, nn):
        return wilson_interval(int(x.sum()), int(nn.sum()))

    assert coverage(p, n, reps, 2, pooled) < 0.80
    cov = coverage(p, n, reps, 2, mean_of_rates)
    assert cov >= LEVEL - 3 * math.sqrt(LEVEL * (1 - LEVEL) / reps)
