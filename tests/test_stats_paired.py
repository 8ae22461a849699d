"""Paired tests: a planted effect is found and covered, a null is not rejected too often."""

from __future__ import annotations

import numpy as np
import pytest

from memtrials.stats.paired import mcnemar_exact, paired_bootstrap, paired_difference


def paired_binary(rng, n, p_x, p_y, rho=0.5):
    """Correlated paired 0/1 outcomes with marginals p_x, p_y (shared latent normal)."""
    from scipy.stats import norm

    z = rng.standard_normal(n)
    e1, e2 = rng.standard_normal(n), rng.standard_normal(n)
    a = np.sqrt(rho) * z + np.sqrt(1 - rho) * e1
    b = np.sqrt(rho) * z + np.sqrt(1 - rho) * e2
    return (a < norm.ppf(p_x)).astype(int), (b < norm.ppf(p_y)).astype(int)


def test_planted_effect_is_detected_and_covered():
    rng = np.random.default_rng(1)
    covered = rejected = 0
    sims = 150
    for s in range(sims):
        x, y = paired_binary(rng, 300, 0.40, 0.52)
        r = paired_difference(x, y, n_boot=1000, seed=s)
        covered += r.diff.lo <= 0.12 <= r.diff.hi
        rejected += r.p_mcnemar < 0.05
    assert covered / sims > 0.88          # nominal 0.95
    assert rejected / sims > 0.8          # power against a 12-point paired gain


def test_null_is_rarely_rejected_and_interval_covers_zero():
    rng = np.random.default_rng(2)
    rejected = covered = 0
    sims = 200
    for s in range(sims):
        x, y = paired_binary(rng, 200, 0.45, 0.45)
        rejected += mcnemar_exact(x, y) < 0.05
        iv = paired_bootstrap(x, y, n_boot=1000, seed=s)
        covered += iv.lo <= 0 <= iv.hi
    assert rejected / sims < 0.08         # exact test: at most about 5 %
    assert covered / sims > 0.9


def test_exact_values_and_errors():
    # 8 discordant pairs all one way: p = 2 * 0.5**8
    x = [1] * 8 + [0] * 4
    y = [0] * 8 + [0] * 4
    assert mcnemar_exact(x, y) == pytest.approx(2 * 0.5 ** 8)
    assert mcnemar_exact([1, 0], [1, 0]) == 1.0
    r = paired_difference(x, y)
    assert (r.n10, r.n01) == (8, 0) and r.diff.estimate == pytest.approx(-8 / 12)
    assert paired_bootstrap([1, 0, 1], [1, 0, 1], seed=3) == paired_bootstrap([1, 0, 1], [1, 0, 1], seed=3)
    with pytest.raises(ValueError, match="differ in length"):
        mcnemar_exact([1, 0], [1])
    with pytest.raises(ValueError, match="0/1"):
        mcnemar_exact([2, 0], [1, 0])
