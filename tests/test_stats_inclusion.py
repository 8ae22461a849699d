"""Simulation tests of the randomized-inclusion estimators (memtrials.stats.inclusion).

Every tolerance comes from the simulation's own spread: a mean over R replicates is
checked to within 4 standard errors of that mean, a rate to within 3 binomial SEs.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats as st
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.model_selection import LeaveOneGroupOut, cross_val_predict

from memtrials.stats.inclusion import (
    DEFAULT_RELATIVE_GRID,
    demean_by_task,
    fixed_effects_fit,
    loto_errors,
    ridge_loto,
    with_without,
)


def simulate(rng: np.random.Generator, *, n: int, m: int, n_tasks: int, effects=None, interaction=None,
             p: float = 0.5, alpha_range: tuple[float, float] = (0.3, 0.65)):
    """One practice round: tasks of differing difficulty, Bernoulli(p) inclusions, 0/1 success.

    Success probability = alpha_task + z . effects (+ g z_a z_b for ``interaction=(a, b, g)``),
    kept inside [0, 1] by the planted sizes (no clipping, so the model is what is planted).
    """
    task = rng.integers(0, n_tasks, n)
    alpha = np.linspace(*alpha_range, n_tasks)
    z = (rng.random((n, m)) < p).astype(int)
    mu = alpha[task] + (z @ np.asarray(effects, float) if effects is not None else 0.0)
    if interaction is not None:
        a, b, g = interaction
        mu = mu + g * z[:, a] * z[:, b]
    assert mu.min() >= 0 and mu.max() <= 1
    y = (rng.random(n) < mu).astype(float)
    return np.array([f"task-{t:02d}" for t in task]), z, y


def _mean_and_se(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return draws.mean(0), draws.std(0, ddof=1) / np.sqrt(draws.shape[0])


EFFECTS = np.array([0.12, -0.10, 0.05, 0.0, -0.03, 0.08])


def test_unpenalised_fit_recovers_planted_additive_effects_without_bias():
    rng = np.random.default_rng(11)
    coefs, diffs = [], []
    for _ in range(300):
        task, z, y = simulate(rng, n=240, m=6, n_tasks=12, effects=EFFECTS)
        coefs.append(fixed_effects_fit(task, z, y).coef)
        diffs.append(with_without(task, z, y)["diff"].to_numpy())
    for draws in (np.array(coefs), np.array(diffs)):
        mean, se = _mean_and_se(draws)
        assert np.all(np.abs(mean - EFFECTS) < 4 * se), (mean, se)
        assert se.max() < 0.005  # the check has power: a bias of 0.02 would fail it


def test_noiseless_linear_model_is_fitted_exactly_with_task_intercepts():
    rng = np.random.default_rng(3)
    task = np.repeat(["a", "b", "c", "d"], 25)
    z = rng.integers(0, 2, (100, 5))
    alpha = {"a": 10.0, "b": 40.0, "c": 55.0, "d": 90.0}  # 0-100 scores work unchanged
    beta = np.array([5.0, -7.0, 0.0, 2.5, 11.0])
    y = np.array([alpha[t] for t in task]) + z @ beta
    fit = fixed_effects_fit(task, z, y)
    np.testing.assert_allclose(fit.coef, beta, atol=1e-9)
    assert fit.intercepts == pytest.approx(alpha, abs=1e-9)
    # the same as least squares with explicit task dummies (what demeaning stands in for)
    dummies = pd.get_dummies(task).to_numpy(float)
    full = LinearRegression(fit_intercept=False).fit(np.hstack([z, dummies]), y).coef_
    np.testing.assert_allclose(fit.coef, full[:5], atol=1e-9)


def test_demeaning_equals_ridge_with_unpenalised_dummies():
    """Exactness of partialling out: ridge on demeaned data == the penalised-theta, free-alpha problem."""
    rng = np.random.default_rng(5)
    task, z, y = simulate(rng, n=120, m=4, n_tasks=6, effects=[0.1, -0.1, 0.0, 0.2])
    lam = 7.0
    fit = fixed_effects_fit(task, z, y, lam=lam)
    # solve the full problem's normal equations with the dummies left unpenalised
    d = pd.get_dummies(task).to_numpy(float)
    x = np.hstack([z, d])
    pen = np.diag([lam] * 4 + [0.0] * d.shape[1])
    sol = np.linalg.solve(x.T @ x + pen, x.T @ y)
    np.testing.assert_allclose(fit.coef, sol[:4], atol=1e-10)
    np.testing.assert_allclose(sorted(fit.intercepts.values()), sorted(sol[4:]), atol=1e-10)


def test_block_that_adds_g_only_alongside_another_gets_half_of_g():
    g = 0.3
    rng = np.random.default_rng(12)
    coefs, diffs = [], []
    for _ in range(300):
        task, z, y = simulate(rng, n=240, m=5, n_tasks=10, interaction=(0, 1, g))
        coefs.append(fixed_effects_fit(task, z, y).coef)
        diffs.append(with_without(task, z, y)["diff"].to_numpy())
    target = np.array([g / 2, g / 2, 0, 0, 0])
    for draws in (np.array(coefs), np.array(diffs)):
        mean, se = _mean_and_se(draws)
        assert np.all(np.abs(mean - target) < 4 * se), (mean, se)
        assert abs(mean[0] - g) > 20 * se[0]  # clearly not the full g a leave-one-out contrast gives


def test_ridge_scales_an_orthogonal_design_by_one_factor():
    """Z~'Z~ = cI (a full 2^m factorial in every task): theta_lambda = c/(c+lambda) theta_0 exactly."""
    m = 4
    rows = np.array(list(itertools.product([0, 1], repeat=m)))
    task = np.repeat([f"t{k}" for k in range(5)], len(rows) * 2)
    z = np.tile(rows, (10, 1))
    rng = np.random.default_rng(8)
    y = rng.random(len(task)) + z @ np.array([0.3, -0.2, 0.1, 0.05])
    zt = demean_by_task(task, z)
    gram = zt.T @ zt
    c = gram[0, 0]
    np.testing.assert_allclose(gram, c * np.eye(m), atol=1e-9)
    ols = fixed_effects_fit(task, z, y).coef
    for lam in (0.5, c, 10 * c):
        np.testing.assert_allclose(fixed_effects_fit(task, z, y, lam=lam).coef, c / (c + lam) * ols, atol=1e-10)
    fit = ridge_loto(task, z, y)
    np.testing.assert_allclose(fit.coef, fit.shrink * ols, atol=1e-10)


def test_ridge_keeps_signs_and_order_under_a_balanced_random_design():
    effects = np.array([-0.15, -0.08, -0.03, 0.02, 0.06, 0.10, 0.14, 0.18]) * 0.6
    rng = np.random.default_rng(21)
    ratios, rank_corr, sign_ok = [], [], []
    for _ in range(60):
        task, z, y = simulate(rng, n=400, m=8, n_tasks=20, effects=effects, alpha_range=(0.2, 0.65))
        base = fixed_effects_fit(task, z, y).coef
        c = float(np.mean(np.sum(demean_by_task(task, z) ** 2, axis=0)))
        ridge = fixed_effects_fit(task, z, y, lam=c).coef  # halves every estimate
        ratios.append(ridge / base)
        rank_corr.append(st.spearmanr(ridge, base).statistic)
        se = with_without(task, z, y, by_task=True)["se"].to_numpy()
        clear = np.abs(base) > 2 * se
        sign_ok.append(bool(np.all(np.sign(ridge[clear]) == np.sign(base[clear]))))
    ratios = np.array(ratios)
    assert all(sign_ok)
    assert np.median(rank_corr) == 1.0 and min(rank_corr) > 0.95
    # one common factor about c/(c+c) = 1/2; blocks with estimates near 0 wobble most
    clear_ratio = ratios[:, np.abs(effects) > 0.05]
    assert np.all(np.abs(np.median(clear_ratio, axis=0) - 0.5) < 0.02)


def _replicate_nulls(r: int, seed: int):
    rng = np.random.default_rng(seed)
    for _ in range(r):
        yield simulate(rng, n=200, m=8, n_tasks=10)


@pytest.mark.parametrize("by_task", [False, True])
def test_with_without_intervals_cover_at_the_nominal_rate_under_the_null(by_task):
    covered = []
    for task, z, y in _replicate_nulls(400, 31):
        tab = with_without(task, z, y, by_task=by_task)
        covered.extend(((tab["lo"] <= 0) & (tab["hi"] >= 0)).tolist())
    rate, k = float(np.mean(covered)), len(covered)
    assert abs(rate - 0.95) < 3 * np.sqrt(0.95 * 0.05 / k), rate


def test_wald_interval_detects_a_planted_effect():
    rng = np.random.default_rng(4)
    hits = [with_without(*simulate(rng, n=400, m=3, n_tasks=8, effects=[0.2, 0.0, -0.2]))["pvalue"].to_numpy() < 0.05
            for _ in range(50)]
    power = np.mean(hits, axis=0)
    assert power[0] > 0.95 and power[2] > 0.95 and power[1] < 0.2


def _false_effect_rate(samples) -> float:
    found = []
    for task, z, y in samples:
        fit = ridge_loto(task, z, y)
        se = with_without(task, z, y, by_task=True)["se"].to_numpy()
        found.extend((np.abs(fit.coef) > st.norm.ppf(0.975) * se).tolist())
    return float(np.mean(found))


def test_ridge_does_not_find_effects_too_often_under_the_null():
    r = 150
    rate = _false_effect_rate(_replicate_nulls(r, 41))
    assert rate < 0.05 + 3 * np.sqrt(0.05 * 0.95 / (r * 8)), rate
    # the same criterion does find planted effects (so the null check can fail)
    rng = np.random.default_rng(42)
    planted = [simulate(rng, n=200, m=8, n_tasks=10, effects=[0.25, -0.25, 0, 0, 0, 0, 0, 0]) for _ in range(20)]
    assert _false_effect_rate(planted) > 2 / 8 * 0.8


def test_leave_one_task_out_picks_large_lambda_under_null_and_small_under_strong_effects():
    null_shrink = [ridge_loto(*s).shrink for s in _replicate_nulls(60, 51)]
    rng = np.random.default_rng(52)
    strong = [ridge_loto(*simulate(rng, n=400, m=4, n_tasks=10, effects=[0.25, -0.25, 0.2, -0.15],
                                      alpha_range=(0.42, 0.55))).shrink
              for _ in range(60)]
    assert np.median(null_shrink) < 0.5, np.median(null_shrink)
    assert np.median(strong) > 0.9 and min(strong) > 0.5, (np.median(strong), min(strong))


def test_closed_form_folds_match_sklearn_cross_val_predict():
    rng = np.random.default_rng(6)
    task, z, y = simulate(rng, n=150, m=5, n_tasks=7, effects=[0.1, 0, -0.1, 0.05, 0])
    z[:, 4] = 1  # a block always served: no variation, a singular fold at lambda = 0
    zt, yt = demean_by_task(task, z), demean_by_task(task, y)
    grid = [0.0, 0.3, 5.0, 80.0]
    ours = loto_errors(task, z, y, grid)
    for lam, err in zip(grid, ours):
        est = LinearRegression(fit_intercept=False) if lam == 0 else Ridge(alpha=lam, fit_intercept=False)
        pred = cross_val_predict(est, zt, yt, groups=task, cv=LeaveOneGroupOut())
        assert err == pytest.approx(np.mean((yt - pred) ** 2), rel=1e-9)


def test_chosen_lambda_grid_curve_and_tie_rule():
    rng = np.random.default_rng(9)
    task, z, y = simulate(rng, n=200, m=4, n_tasks=8, effects=[0.2, -0.2, 0.1, 0.0])
    fit = ridge_loto(task, z, y, lambdas=[100.0, 0.0, 1.0, 10.0, 10.0])
    assert list(fit.lambdas) == [0.0, 1.0, 10.0, 100.0]
    curve = fit.curve()
    assert list(curve.columns) == ["lam", "cv_mse", "chosen"] and curve["chosen"].sum() == 1
    assert fit.lam == curve.loc[curve["cv_mse"].idxmin(), "lam"]
    np.testing.assert_allclose(fit.coef, fixed_effects_fit(task, z, y, lam=fit.lam).coef)
    # the default grid is relative to c, the mean diagonal of Z~'Z~
    default = ridge_loto(task, z, y)
    np.testing.assert_allclose(default.lambdas, np.asarray(DEFAULT_RELATIVE_GRID) * default.shrink_unit)
    # success constant within every task: every lambda predicts perfectly -> tie -> the largest lambda
    flat = np.array([{"task-00": 1.0}.get(t, 0.0) for t in task])
    tied = ridge_loto(task, z, flat, lambdas=[0.0, 1.0, 50.0])
    assert tied.lam == 50.0 and np.all(tied.cv_mse == 0) and np.allclose(tied.coef, 0)


def test_bad_input_is_refused_with_the_reason():
    task, z, y = ["a", "a", "b", "b"], [[0, 1], [1, 0], [1, 1], [0, 0]], [1, 0, 1, 0]
    with pytest.raises(ValueError, match="at least 2 tasks"):
        ridge_loto(["a"] * 4, z, y)
    with pytest.raises(ValueError, match="disagree in number"):
        fixed_effects_fit(task, z, y[:3])
    with pytest.raises(ValueError, match="0 or 1"):
        with_without(task, [[0, 2], [1, 0], [1, 1], [0, 0]], y)
    with pytest.raises(ValueError, match="NaN"):
        fixed_effects_fit(task, z, [1, np.nan, 0, 0])
    with pytest.raises(ValueError, match="2-D"):
        fixed_effects_fit(task, [0, 1, 0, 1], y)
    with pytest.raises(ValueError, match="lambdas"):
        ridge_loto(task, z, y, lambdas=[-1.0])
    with pytest.raises(ValueError, match="lambda must be"):
        fixed_effects_fit(task, z, y, lam=-2.0)


def test_with_without_table_and_a_block_never_left_out():
    task = ["a"] * 6 + ["b"] * 6
    z = np.column_stack([np.ones(12, int), np.tile([0, 1], 6)])
    y = np.array([0, 1] * 6, float)
    tab = with_without(task, z, y)
    assert tuple(tab.columns) == ("block", "n_with", "n_without", "mean_with", "mean_without",
                                  "diff", "se", "lo", "hi", "pvalue")
    assert tab.loc[0, "n_without"] == 0 and np.isnan(tab.loc[0, "se"]) and np.isnan(tab.loc[0, "lo"])
    assert tab.loc[1, "diff"] == 1.0 and tab.loc[1, "se"] == 0.0 and tab.loc[1, "pvalue"] == 0.0
