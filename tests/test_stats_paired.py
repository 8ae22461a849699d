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


def coverage_and_rejections(seed: int, sims: int, n: int, p_x: float, p_y: float, truth: float) -> tuple[float, float]:
    """Over ``sims`` simulated samples of ``n`` pairs: the share of bootstrap intervals (level
    0.95) that cover ``truth`` and the share of exact McNemar tests that reject at 0.05."""
    rng = np.random.default_rng(seed)
    covered = rejected = 0
    for s in range(sims):
        x, y = paired_binary(rng, n, p_x, p_y)
        r = paired_difference(x, y, n_boot=1000, seed=s)  # paired_bootstrap and mcnemar_exact of the pairs
        covered += r.diff.lo <= truth <= r.diff.hi
        rejected += r.p_mcnemar < 0.05
    return covered / sims, rejected / sims


def test_planted_effect_is_detected_and_covered():
    covered, rejected = coverage_and_rejections(1, 150, 300, 0.40, 0.52, truth=0.12)
    assert covered > 0.88          # nominal 0.95
    assert rejected > 0.8          # power against a 12-point paired gain


def test_null_is_rarely_rejected_and_interval_covers_zero():
    covered, rejected = coverage_and_rejections(2, 200, 200, 0.45, 0.45, truth=0)
    assert rejected < 0.08         # exact test: at most about 5 %
    assert covered > 0.9


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
