"""Betting test: a known case by hand, validity under heterogeneous nulls, power, Holm."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from memtrials.stats import betting_pvalue, betting_wealth, holm


def test_known_case_by_hand():
    # values on [-2, 2], null 0: m' = 0.5, lambda = 1.5
    x = np.array([1.0, 0.0, 2.0, -1.0])
    y = (x + 2) / 4
    k = np.prod(1 + 1.5 * (y - 0.5))
    assert betting_wealth(x, (-2, 2), 0.0) == pytest.approx(k)
    assert betting_pvalue(x, (-2, 2), 0.0) == pytest.approx(min(1, 1 / k))
    # 16 worlds all at +1: K = 1.375**16
    assert betting_pvalue(np.ones(16), (-2, 2)) == pytest.approx(1.375 ** -16)


def test_mean_at_least_uses_negation():
    # H0: mean >= 0.10 on [-1, 1]; negated values on [-1, 1], null -0.10
    x = np.zeros(50)
    m = (1 - 0.10) / 2  # rescaled negated null
    lam = 0.75 / m
    k = np.prod(1 + lam * ((1 - x) / 2 - m))
    assert betting_pvalue(x, (-1, 1), 0.10, alternative="less") == pytest.approx(1 / k)
    assert betting_pvalue(x, (-1, 1), 0.10, alternative="less") < 0.025


def test_null_not_rejected_too_often_heterogeneous():
    """Units with different means whose average is exactly the null: level <= alpha."""
    rng = np.random.default_rng(4)
    reps, n = 1500, 100
    means = np.linspace(-0.3, 0.3, n)  # average 0; each unit is a {-1, 1} coin
    probs = (means + 1) / 2
    rej = 0
    for _ in range(reps):
        x = np.where(rng.random(n) < probs, 1.0, -1.0)
        rej += betting_pvalue(x, (-1, 1), 0.0) < 0.05
    assert rej / reps <= 0.05


def test_detects_planted_effect():
    rng = np.random.default_rng(5)
    # per-world P-type values with planted mean 0.10 on [-2, 2]
    hits = 0
    for _ in range(200):
        x = rng.choice([0.0, 1.0], size=256, p=[0.9, 0.1])
        hits += betting_pvalue(x, (-2, 2), 0.0) < 0.05
    assert hits / 200 > 0.8


def test_bad_arguments():
    with pytest.raises(ValueError, match="strictly inside"):
        betting_pvalue([0.0], (-1, 1), null=1.0)
    with pytest.raises(ValueError, match="alternative"):
        betting_pvalue([0.0], (-1, 1), alternative="two-sided")  # type: ignore[arg-type]


def test_holm_equals_statsmodels():
    rng = np.random.default_rng(6)
    for size in (2, 2, 3, 5):
        p = rng.random(size) ** 3
        assert holm(p) == pytest.approx(list(multipletests(p, method="holm")[1]))
    assert holm([0.01, 0.04]) == pytest.approx([0.02, 0.04])
    # a missing member stays in the registered family as p = 1 (tests/test_stats_multiplicity.py)
    assert holm([0.01, float("nan")]) == pytest.approx([0.02, 1.0])
