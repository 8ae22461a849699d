"""Simulation tests of DG-Mem's subset-Shapley estimator (hindsight.stats.shapley).

A mean over R replicates is checked to within 4 of its standard errors; a coverage rate
to within 3 binomial standard errors.  The planted value functions are exact set
functions, so the targets come from :func:`shapley_values` (2^m terms), not from a formula
in the test.
"""

from __future__ import annotations

import numpy as np
import pytest

from hindsight.stats.inclusion import fixed_effects_fit, ridge_loto
from hindsight.stats.shapley import banzhaf_values, loo_task_demean, shapley_values, subset_shapley


def simulate(rng, value, *, n: int, m: int, n_tasks: int, alpha=(0.3, 0.5)):
    """Episodes with success probability alpha_task + value(T) for the served blocks T."""
    task = rng.integers(0, n_tasks, n)
    a = np.linspace(*alpha, n_tasks)
    z = (rng.random((n, m)) < 0.5).astype(int)
    v = np.array([value(frozenset(np.flatnonzero(row).tolist())) for row in z])
    mu = a[task] + v
    assert mu.min() >= 0 and mu.max() <= 1
    y = (rng.random(n) < mu).astype(float)
    return np.array([f"t{t}" for t in task]), z, y


def _mean_se(draws):
    draws = np.asarray(draws)
    return draws.mean(0), draws.std(0, ddof=1) / np.sqrt(len(draws))


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


def test_planted_subset_shapley_values_are_recovered_not_banzhaf():
    m, g = 4, 0.36

    def value(t):  # one block adds alone, one harms, and three add g only all together
        return 0.10 * (3 in t) - 0.08 * (0 in t) + g * ({0, 1, 2} <= t)

    target, banzhaf = shapley_values(value, m), banzhaf_values(value, m)
    assert abs(target[1] - banzhaf[1]) == pytest.approx(g / 3 - g / 4)
    draws = []
    rng = np.random.default_rng(7)
    for _ in range(300):
        task, z, y = simulate(rng, value, n=320, m=m, n_tasks=8)
        draws.append(subset_shapley(task, z, y)["estimate"].to_numpy())
    mean, se = _mean_se(draws)
    assert np.all(np.abs(mean - target) < 4 * se), (mean, target, se)
    # the check has power: it tells the Shapley target from the Banzhaf one for blocks 1 and 2
    assert np.all(np.abs(mean[1:3] - banzhaf[1:3]) > 4 * se[1:3]), (mean, banzhaf, se)


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


def test_a_null_design_centres_on_zero_and_its_intervals_cover():
    m, R = 5, 400
    rng = np.random.default_rng(11)
    est, cover = [], []
    for _ in range(R):
        task, z, y = simulate(rng, lambda t: 0.0, n=200, m=m, n_tasks=6)
        t = subset_shapley(task, z, y)
        est.append(t["estimate"].to_numpy())
        cover.append(((t["lo"] <= 0) & (t["hi"] >= 0)).to_numpy())
    mean, se = _mean_se(est)
    assert np.all(np.abs(mean) < 4 * se)
    rate = float(np.mean(cover))
    assert abs(rate - 0.95) < 3 * np.sqrt(0.95 * 0.05 / (R * m)), rate


def test_missing_strata_are_dropped_and_recorded():
    task = ["a", "a", "b", "b"]
    z = [[1, 0], [0, 0], [1, 1], [0, 0]]  # block 0 with the other off: both sides; with it on: no 'off' side
    y = [1.0, 0.0, 1.0, 0.0]
    t = subset_shapley(task, z, y, by_task=False)
    assert t.loc[0, "strata_used"] == 1 and t.loc[0, "strata_missing"] == "1"
    assert t.loc[0, "estimate"] == pytest.approx(1.0)  # only the size-0 stratum: 1 - mean(0, 0)
    assert t.loc[1, "strata_used"] == 1 and t.loc[1, "strata_missing"] == "0"  # block 1 is on only with 0 on
    lone = subset_shapley(["a", "b"], [[1, 0], [1, 0]], [1.0, 0.0], by_task=False)
    assert np.isnan(lone.loc[0, "estimate"]) and lone.loc[0, "strata_used"] == 0  # never left out: no stratum
    with pytest.raises(ValueError, match="0 or 1"):
        subset_shapley(task, [[2, 0]] * 4, y)


def test_leave_one_out_task_centring():
    y = np.array([1.0, 0.0, 1.0, 1.0, 0.0])
    task = np.array(["a", "a", "a", "b", "c"])
    out = loo_task_demean(task, y)
    np.testing.assert_allclose(out[:3], [1 - 0.5, 0 - 1.0, 1 - 0.5])
    np.testing.assert_allclose(out[3:], [1 - 2 / 4, 0 - 3 / 4])  # alone in its task: centred on all others
