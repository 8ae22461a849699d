"""Simulation tests of DG-Mem's subset-Shapley estimator (memtrials.stats.shapley).

Exactness first: over every inclusion pattern of a small round (deterministic successes),
the design-weighted mean of the estimate *is* the Shapley value, to rounding.  Then by
simulation at realistic round sizes, where the extreme sizes are rare and most rounds hold
no episode at some size: a mean over R replicates is checked to within 4 of its standard
errors; a rejection or coverage rate to within 3 binomial standard errors.  The planted
value functions are exact set functions, so the targets come from :func:`shapley_values`
(2^m terms), not from a formula in the test.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from memtrials.stats.inclusion import fixed_effects_fit, ridge_loto
from memtrials.stats.shapley import (banzhaf_values, loo_predictions, shapley_values, size_probabilities,
                                     subset_shapley)


def simulate(rng, value, *, n: int, m: int, n_tasks: int, alpha=(0.3, 0.5), p: float = 0.5):
    """Episodes with success probability alpha_task + value(T) for the served blocks T."""
    task = rng.integers(0, n_tasks, n)
    a = np.linspace(*alpha, n_tasks)
    z = (rng.random((n, m)) < p).astype(int)
    v = np.array([value(frozenset(np.flatnonzero(row).tolist())) for row in z])
    mu = a[task] + v
    assert mu.min() >= 0 and mu.max() <= 1
    y = (rng.random(n) < mu).astype(float)
    return np.array([f"t{t}" for t in task]), z, y


def _mean_se(draws):
    draws = np.asarray(draws)
    return draws.mean(0), draws.std(0, ddof=1) / np.sqrt(len(draws))


def _replicate(rng, value, R, **kw):
    """Estimates, interval-covers-target flags and 'some size unobserved' flags over R rounds."""
    m, p = kw["m"], kw.get("p", 0.5)
    target = shapley_values(value, m)
    est, cover, missing = [], [], []
    for _ in range(R):
        task, z, y = simulate(rng, value, **kw)
        t = subset_shapley(task, z, y, p=p)
        est.append(t["estimate"].to_numpy())
        cover.append(((t["lo"] <= target) & (t["hi"] >= target)).to_numpy())
        missing.append(bool((t["strata_used"] < m).any()))
    return np.array(est), np.array(cover), np.array(missing)


def test_exact_values_of_known_games():
    # additive: both values are the effects; a unanimity game on {0,1,2}: Shapley 1/3 each, Banzhaf 1/4
    beta = np.array([0.2, -0.1, 0.0, 0.05])
    add = lambda t: float(sum(beta[list(t)]))  # noqa: E731
    np.testing.assert_allclose(shapley_values(add, 4), beta, atol=1e-12)
    np.testing.assert_allclose(banzhaf_values(add, 4), beta, atol=1e-12)
    three = lambda t: 1.0 if {0, 1, 2} <= t else 0.0  # noqa: E731
    np.testing.assert_allclose(shapley_values(three, 4), [1 / 3, 1 / 3, 1 / 3, 0], atol=1e-12)
    np.testing.assert_allclose(banzhaf_values(three, 4), [1 / 4, 1 / 4, 1 / 4, 0], atol=1e-12)
    assert shapley_values(three, 4).sum() == pytest.approx(three(frozenset(range(4))) - three(frozenset()))
    np.testing.assert_allclose(size_probabilities(4, 1 / 3), [8 / 27, 12 / 27, 6 / 27, 1 / 27], atol=1e-12)


@pytest.mark.parametrize("n,m,p", [(1, 4, 0.5), (2, 4, 0.5), (2, 4, 1 / 3), (3, 3, 1 / 3)])
def test_the_estimate_is_exactly_unbiased_over_every_inclusion_pattern(n, m, p):
    """Deterministic successes task offset + V(T), every one of the 2^(n m) designs weighed by its
    probability: the expected estimate equals the Shapley value (no size dropped, none renormalised),
    although most patterns leave some size without an episode on one side."""
    offset = [0.1, 0.35, 0.2][:n]
    task = ["a", "b", "a"][:n]

    def value(t):
        return 0.15 * (0 in t) - 0.1 * (1 in t) + 0.4 * ({0, 1, 2} <= t) + 0.05 * (len(t) == m)

    expected, some_missing = np.zeros(m), 0.0
    for bits in itertools.product((0, 1), repeat=n * m):
        z = np.array(bits).reshape(n, m)
        prob = float(np.prod(np.where(z == 1, p, 1 - p)))
        y = [offset[i] + value(frozenset(np.flatnonzero(z[i]).tolist())) for i in range(n)]
        t = subset_shapley(task, z, y, p=p)
        expected += prob * t["estimate"].to_numpy()
        some_missing += prob * float((t["strata_used"] < m).any())
    np.testing.assert_allclose(expected, shapley_values(value, m), atol=1e-10)
    assert some_missing > 0.9
    assert not np.allclose(shapley_values(value, m), banzhaf_values(value, m), atol=1e-3)  # the target matters


def test_planted_values_recovered_at_m4_not_banzhaf():
    m, g = 4, 0.36

    def value(t):  # one block adds alone, one harms, and three add g only all together
        return 0.10 * (3 in t) - 0.08 * (0 in t) + g * ({0, 1, 2} <= t)

    target, banzhaf = shapley_values(value, m), banzhaf_values(value, m)
    assert abs(target[1] - banzhaf[1]) == pytest.approx(g / 3 - g / 4)
    est, cover, _ = _replicate(np.random.default_rng(7), value, 300, n=320, m=m, n_tasks=8)
    mean, se = _mean_se(est)
    assert np.all(np.abs(mean - target) < 4 * se), (mean, target, se)
    # the check has power: it tells the Shapley target from the Banzhaf one for blocks 1 and 2
    assert np.all(np.abs(mean[1:3] - banzhaf[1:3]) > 4 * se[1:3]), (mean, banzhaf, se)
    assert cover.mean() > 0.95 - 3 * np.sqrt(0.95 * 0.05 / cover.size)


def test_planted_values_recovered_at_m8_where_extreme_sizes_are_rare():
    """m = 8, 240 episodes (the paper's m; sizes 0 and 7 hold 1/128 of the episodes each): every
    round misses some size, and the estimate is still unbiased for the Shapley value."""
    m, g = 8, 0.45

    def value(t):
        return 0.12 * (3 in t) - 0.10 * (0 in t) - 0.05 * (5 in t) + g * ({0, 1, 2, 4} <= t)

    target, banzhaf = shapley_values(value, m), banzhaf_values(value, m)
    est, cover, missing = _replicate(np.random.default_rng(5), value, 300, n=240, m=m, n_tasks=8,
                                     alpha=(0.2, 0.35))
    assert missing.mean() > 0.9  # realistic: the renormalising estimator would have dropped sizes here
    mean, se = _mean_se(est)
    assert np.all(np.abs(mean - target) < 4 * se), (mean, target, se)
    assert np.all(np.abs(mean[[1, 2, 4]] - banzhaf[[1, 2, 4]]) > 4 * se[[1, 2, 4]]), (mean, banzhaf, se)
    assert cover.mean() > 0.95 - 3 * np.sqrt(0.95 * 0.05 / cover.size)


def test_recovered_under_inclusion_at_one_over_k():
    """The pooled round's design (p = 1/K, K = 3): the known size probabilities change, the target does not."""
    m = 4

    def value(t):
        return 0.10 * (3 in t) - 0.08 * (0 in t) + 0.36 * ({0, 1, 2} <= t)

    est, _, _ = _replicate(np.random.default_rng(13), value, 200, n=240, m=m, n_tasks=6, p=1 / 3)
    mean, se = _mean_se(est)
    assert np.all(np.abs(mean - shapley_values(value, m)) < 4 * se), (mean, se)


def test_a_null_at_m8_is_not_rejected_too_often():
    m, R = 8, 300
    est, cover, missing = _replicate(np.random.default_rng(11), lambda t: 0.0, R, n=240, m=m, n_tasks=6)
    assert missing.mean() > 0.9
    mean, se = _mean_se(est)
    assert np.all(np.abs(mean) < 4 * se)
    rejected = 1 - float(cover.mean())  # the 95 % interval excludes the true 0
    assert rejected < 0.05 + 3 * np.sqrt(0.05 * 0.95 / (R * m)), rejected


def test_on_additive_effects_it_agrees_with_the_ridge_within_noise():
    beta = np.array([0.12, -0.10, 0.05, 0.0, -0.04, 0.08])
    value = lambda t: float(sum(beta[list(t)]))  # noqa: E731
    rng = np.random.default_rng(3)
    shap, ols, loto, inside = [], [], [], []
    for _ in range(150):
        task, z, y = simulate(rng, value, n=400, m=6, n_tasks=10, alpha=(0.3, 0.45))
        t = subset_shapley(task, z, y)
        fit = ridge_loto(task, z, y)
        shap.append(t["estimate"].to_numpy())
        ols.append(fixed_effects_fit(task, z, y).coef)
        loto.append(fit.coef)
        inside.append(np.abs(t["estimate"].to_numpy() - fit.unpenalised) < 3 * t["se"].to_numpy())
    for draws in (shap, ols):
        mean, se = _mean_se(draws)
        assert np.all(np.abs(mean - beta) < 4 * se), (mean, se)
    diff_mean, diff_se = _mean_se(np.array(shap) - np.array(ols))
    assert np.all(np.abs(diff_mean) < 4 * diff_se)
    assert np.mean(inside) > 0.95  # per round, the two lie within the Shapley estimate's noise
    # on average they order the blocks alike (the LOTO ridge shrinks, it keeps the order)
    assert list(np.argsort(np.mean(shap, 0))) == list(np.argsort(np.mean(loto, 0))) == list(np.argsort(beta))


def test_unobserved_sizes_are_recorded_not_dropped():
    task = ["a", "a", "b", "b"]
    z = [[1, 0], [0, 0], [1, 1], [0, 0]]  # block 0: size 0 on both sides, size 1 only with it
    y = [1.0, 0.0, 1.0, 0.0]
    t = subset_shapley(task, z, y, by_task=False)
    assert t.loc[0, "strata_used"] == 1 and t.loc[0, "strata_missing"] == "1" and t.loc[0, "weight_missing"] == 0.5
    assert t.loc[1, "strata_missing"] == "0" and t["estimate"].notna().all()  # every block gets a value
    with pytest.raises(ValueError, match="0 or 1"):
        subset_shapley(task, [[2, 0]] * 4, y)
    with pytest.raises(ValueError, match="inclusion probability"):
        subset_shapley(task, z, y, p=1.0)


def test_leave_one_out_predictions_match_refits():
    rng = np.random.default_rng(0)
    x = np.hstack([np.eye(3)[rng.integers(0, 3, 9)], rng.integers(0, 2, (9, 2))])
    x = np.hstack([x, x[:, 3:4] + x[:, 4:5]])  # rank deficient on purpose
    y = rng.random(9)
    got = loo_predictions(x, y)
    for i in range(9):
        rest = np.delete(np.arange(9), i)
        beta = np.linalg.lstsq(x[rest], y[rest], rcond=None)[0]
        if np.isfinite(got[i]):
            assert got[i] == pytest.approx(float(x[i] @ beta), abs=1e-9)
    alone = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]])  # row 0 is the only one of its column
    assert np.isnan(loo_predictions(alone, np.array([1.0, 0.0, 1.0]))[0])
