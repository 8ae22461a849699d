"""Intervals: planted means are covered at the nominal rate; the degenerate rule; Wilson."""

from __future__ import annotations

import math

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from memtrials.stats import degenerate_interval, t_interval, t_test_pvalue, wilson_interval


def test_degenerate_rule_matches_registered_formula():
    n, v, a, b = 16, 0.0, -2.0, 2.0
    q = 1 - 0.025 ** (1 / n)
    iv = t_interval(np.zeros(n), (a, b))
    assert iv.degenerate and iv.estimate == 0.0
    assert iv.lo == pytest.approx(v - (v - a) * q)
    assert iv.hi == pytest.approx(v + (b - v) * q)
    # a constant at the support's edge gets a one-sided interval
    edge = t_interval(np.ones(10), (-1.0, 1.0))
    assert edge.hi == pytest.approx(1.0) and edge.lo == pytest.approx(1 - 2 * (1 - 0.025 ** 0.1))
    # one value is constant too
    assert t_interval([0.5], (-1, 1)).degenerate
    assert degenerate_interval(0.0, 256, (-1, 1)).hi == pytest.approx(1 - 0.025 ** (1 / 256))


def test_t_interval_equals_scipy_on_varied_sample():
    from scipy import stats

    x = np.array([0, 1, 0, 0, 1, -1, 0, 1.0])
    iv = t_interval(x, (-1, 1))
    lo, hi = stats.t.interval(0.95, len(x) - 1, loc=x.mean(), scale=stats.sem(x))
    assert not iv.degenerate
    assert (iv.lo, iv.hi) == pytest.approx((lo, hi))


def test_t_interval_covers_planted_mean():
    rng = np.random.default_rng(1)
    hits = 0
    reps = 400
    for _ in range(reps):
        x = rng.choice([-1.0, 0.0, 1.0], size=60, p=[0.1, 0.6, 0.3])  # true mean 0.2
        hits += t_interval(x, (-1, 1)).contains(0.2)
    assert 0.91 <= hits / reps <= 0.98


def test_t_test_null_rejects_at_nominal_rate():
    rng = np.random.default_rng(2)
    rej = np.mean([t_test_pvalue(rng.normal(0, 1, 40)) < 0.05 for _ in range(600)])
    assert 0.02 <= rej <= 0.085
    power = np.mean([t_test_pvalue(rng.normal(0.6, 1, 40)) < 0.05 for _ in range(300)])
    assert power >= 0.85  # planted mean 0.6 sd, n = 40: power about 0.94
    assert t_test_pvalue(np.zeros(5)) == 1.0 and t_test_pvalue(np.ones(5)) == 0.0


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="NaN"):
        t_interval([0.0, math.nan], (-1, 1))
    with pytest.raises(ValueError, match="support"):
        t_interval([3.0], (-1, 1))


def test_wilson_matches_statsmodels_and_edges():
    for k, n in [(0, 10), (3, 10), (10, 10), (17, 256)]:
        iv = wilson_interval(k, n)
        lo, hi = proportion_confint(k, n, method="wilson")
        assert (iv.lo, iv.hi) == pytest.approx((lo, hi))
    assert math.isnan(wilson_interval(0, 0).lo)
    for n in range(1, 40):  # exact edges, not ~1e-17 off (matplotlib error bars need lo <= p)
        assert wilson_interval(0, n).lo == 0.0 and wilson_interval(n, n).hi == 1.0
    with pytest.raises(ValueError):
        wilson_interval(5, 3)


def test_wilson_coverage():
    rng = np.random.default_rng(3)
    p = 0.12
    cover = np.mean([wilson_interval(int(rng.binomial(50, p)), 50).contains(p) for _ in range(500)])
    assert cover >= 0.92
