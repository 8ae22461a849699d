"""Estimating block effects from a randomized-inclusion design.

Each episode ``i`` has a task ``x_i``, a 0/1 inclusion vector ``z_i`` over ``m`` blocks
and a success ``y_i`` (0/1 or a score; no rescaling is done here).  Two estimators of a
block's effect (its Banzhaf value at inclusion probability 1/2):

- :func:`ridge_loto`: ridge regression of ``y`` on ``z`` with one *unpenalised*
  intercept per task, ``min_{alpha, theta} sum_i (y_i - alpha_{x_i} - z_i theta)^2 +
  lambda |theta|^2``, with ``lambda`` chosen by leaving one task out (pooled held-out
  squared error over a grid).  :func:`fixed_effects_fit` is the fit at one ``lambda``
  (``lambda = 0``: least squares, consistent for the effects).
- :func:`with_without`: per block, the mean success of the episodes that include it
  minus the mean of those that leave it out, with its (Welch) standard error and a Wald
  interval.

Why within-task demeaning is exact.  The intercepts are unpenalised, so for any
``theta`` the optimal ``alpha_t`` is the task mean of ``y - z theta``; putting it back
leaves ``sum_i (y~_i - z~_i theta)^2 + lambda |theta|^2`` with ``y~`` and ``z~`` the
within-task demeaned success and inclusions.  The ridge on the demeaned data therefore
gives exactly the ``theta`` of the full problem, for every ``lambda`` (for ``lambda = 0``
this is the Frisch-Waugh-Lovell theorem), and the intercepts follow as
``alpha_t = mean_t(y) - mean_t(z) theta``.  A task with one episode demeans to zero and
only fixes its own intercept.

Leaving a task out.  Demeaning within tasks commutes with splitting by task, so the
held-out task's residuals are ``y~_t - z~_t theta_{-t}``: its own mean plays its
intercept (the one parameter a new task needs), while ``theta_{-t}`` is fitted on the
other tasks only.  The fold solutions come from the per-task Gram matrices in closed form
(one eigendecomposition per fold, exact; ``tests/test_stats_inclusion.py`` pins them to
scikit-learn's ``cross_val_predict``), because refitting scikit-learn's ``Ridge`` per
fold and per ``lambda`` costs about a thousand times more; the final fit is
scikit-learn's.

Source: *Reliable Memory from Unstable Growth* (playbook curation), Section 3.2
("Randomized inclusion", "What is estimated") and Appendix D.1.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats as _st
from sklearn.linear_model import LinearRegression, Ridge

#: The default grid, in units of the mean diagonal ``c`` of ``Z~'Z~`` (about n/4 at
#: p = 1/2): ``lambda = c * r``, r in {0} and 25 log-spaced values from 1e-3 to 1e3, so
#: the shrink factor ``c / (c + lambda)`` of a balanced design runs from 1 to about 0.001.
DEFAULT_RELATIVE_GRID: tuple[float, ...] = (0.0, *np.logspace(-3.0, 3.0, 25).tolist())

#: Two held-out errors count as tied when within this relative distance; ties go to the
#: larger lambda (the more cautious fit).
TIE_RTOL = 1e-12


@dataclass(frozen=True)
class InclusionData:
    """Validated episodes: task labels, the inclusion matrix and the success."""

    task: np.ndarray  # (n,) task labels as strings
    z: np.ndarray  # (n, m) float 0/1
    y: np.ndarray  # (n,) float

    @property
    def n(self) -> int:
        return int(self.y.size)

    @property
    def m(self) -> int:
        return int(self.z.shape[1])


def inclusion_data(task: Sequence, z: Sequence | np.ndarray, y: Sequence[float] | np.ndarray) -> InclusionData:
    """Check and convert one practice round's episodes (raises ``ValueError`` naming the input)."""
    t = np.asarray(task).astype(str).ravel()
    zz = np.asarray(z, dtype=float)
    yy = np.asarray(y, dtype=float).ravel()
    if zz.ndim != 2:
        raise ValueError(f"inclusions: expected a 2-D array (episodes x blocks), got shape {zz.shape}")
    if not (t.size == zz.shape[0] == yy.size):
        raise ValueError(f"episodes disagree in number: {t.size} task ids, {zz.shape[0]} inclusion rows, "
                         f"{yy.size} successes; pass one row per episode")
    if not np.isin(zz, (0.0, 1.0)).all():
        raise ValueError("inclusions: every entry must be 0 or 1 (a block is served or not)")
    if not np.isfinite(yy).all():
        raise ValueError("success: contains NaN or inf; drop or score the unfinished episodes first")
    return InclusionData(t, zz, yy)


def demean_by_task(task: np.ndarray, values: np.ndarray) -> np.ndarray:
    """``values`` (n,) or (n, k) minus their task means (the fixed effects partialled out)."""
    arr = np.asarray(values, dtype=float)
    flat = arr.reshape(len(task), -1)
    codes, uniques = pd.factorize(np.asarray(task))
    sums = np.zeros((len(uniques), flat.shape[1]))
    np.add.at(sums, codes, flat)
    means = sums / np.bincount(codes, minlength=len(uniques))[:, None]
    return (flat - means[codes]).reshape(arr.shape)


@dataclass(frozen=True)
class FixedEffectsFit:
    """Block coefficients at one ``lam``, with each task's intercept."""

    coef: np.ndarray  # (m,)
    lam: float
    intercepts: dict[str, float]


def _fit_demeaned(zt: np.ndarray, yt: np.ndarray, lam: float) -> np.ndarray:
    if lam < 0:
        raise ValueError(f"lambda must be >= 0, got {lam}")
    if zt.shape[1] == 0:
        return np.zeros(0)
    # lambda = 0: least squares, the minimum-norm solution if a block never varies within a task
    model = LinearRegression(fit_intercept=False) if lam == 0 else Ridge(alpha=lam, fit_intercept=False)
    return np.asarray(model.fit(zt, yt).coef_, dtype=float).ravel()


def fixed_effects_fit(task: Sequence, z: Sequence | np.ndarray, y: Sequence[float] | np.ndarray,
                      lam: float = 0.0) -> FixedEffectsFit:
    """Ridge of ``y`` on ``z`` with unpenalised task intercepts, at a given ``lam`` (0: least squares)."""
    d = inclusion_data(task, z, y)
    coef = _fit_demeaned(demean_by_task(d.task, d.z), demean_by_task(d.task, d.y), float(lam))
    resid = pd.Series(d.y - d.z @ coef)
    intercepts = {str(k): float(v) for k, v in resid.groupby(d.task).mean().items()}
    return FixedEffectsFit(coef, float(lam), intercepts)


def _fold_errors(task: np.ndarray, zt: np.ndarray, yt: np.ndarray, lambdas: np.ndarray) -> np.ndarray:
    """Held-out squared error summed over tasks left out one at a time, per lambda (closed form)."""
    codes, _ = pd.factorize(task)
    n_tasks, m = codes.max() + 1, zt.shape[1]
    if m == 0:
        return np.full(lambdas.size, float(yt @ yt))
    gram = np.zeros((n_tasks, m, m))
    cross = np.zeros((n_tasks, m))
    sq = np.zeros(n_tasks)
    np.add.at(gram, codes, zt[:, :, None] * zt[:, None, :])
    np.add.at(cross, codes, zt * yt[:, None])
    np.add.at(sq, codes, yt * yt)
    total_gram, total_cross = gram.sum(0), cross.sum(0)
    err = np.zeros(lambdas.size)
    for t in range(n_tasks):
        w, v = np.linalg.eigh(total_gram - gram[t])
        proj = v.T @ (total_cross - cross[t])  # (m,)
        scale = max(float(w.max()), 1.0)
        denom = w[None, :] + lambdas[:, None]  # (L, m)
        # lambda = 0 on a singular fold: drop the null directions (minimum-norm least squares)
        inv = np.where(denom > 1e-10 * scale, 1.0 / np.where(denom > 0, denom, 1.0), 0.0)
        theta = (inv * proj[None, :]) @ v.T  # (L, m)
        err += sq[t] - 2.0 * theta @ cross[t] + np.einsum("li,ij,lj->l", theta, gram[t], theta)
    return err


def loto_errors(task: Sequence, z: Sequence | np.ndarray, y: Sequence[float] | np.ndarray,
                lambdas: Sequence[float]) -> np.ndarray:
    """Mean held-out squared error per lambda when each task is left out in turn (pooled over episodes)."""
    d = inclusion_data(task, z, y)
    lam = np.asarray(lambdas, dtype=float)
    return _fold_errors(d.task, demean_by_task(d.task, d.z), demean_by_task(d.task, d.y), lam) / d.n


@dataclass(frozen=True)
class RidgeLOTO:
    """The fixed-effects ridge with lambda chosen by leaving one task out."""

    coef: np.ndarray  # (m,) at the chosen lambda
    lam: float  # the chosen lambda
    lambdas: np.ndarray  # the grid, ascending
    cv_mse: np.ndarray  # held-out mean squared error per grid value
    unpenalised: np.ndarray  # (m,) the least-squares fit (lambda = 0)
    intercepts: dict[str, float]  # per task, at the chosen lambda
    shrink_unit: float  # c: mean diagonal of Z~'Z~ (the grid's unit)
    n: int
    n_tasks: int

    @property
    def shrink(self) -> float:
        """``c / (c + lambda)``: the factor a balanced design scales every estimate by."""
        return self.shrink_unit / (self.shrink_unit + self.lam) if self.shrink_unit > 0 else 0.0

    def curve(self) -> pd.DataFrame:
        """The leave-one-task-out curve: lambda, held-out MSE, chosen flag."""
        return pd.DataFrame({"lam": self.lambdas, "cv_mse": self.cv_mse, "chosen": self.lambdas == self.lam})


def ridge_loto(task: Sequence, z: Sequence | np.ndarray, y: Sequence[float] | np.ndarray, *,
               lambdas: Sequence[float] | None = None) -> RidgeLOTO:
    """Fixed-effects ridge, lambda by leave-one-task-out over ``lambdas``.

    ``lambdas`` are absolute penalties; by default ``c * DEFAULT_RELATIVE_GRID`` with ``c``
    the mean diagonal of the demeaned ``Z~'Z~``.  The chosen lambda has the smallest pooled
    held-out squared error; ties (within ``TIE_RTOL``) go to the larger lambda.  At least
    two tasks are needed.
    """
    d = inclusion_data(task, z, y)
    n_tasks = len(set(d.task.tolist()))
    if n_tasks < 2:
        raise ValueError(f"ridge_loto: leaving one task out needs at least 2 tasks, got {n_tasks}; "
                         "draw the practice round over several tasks or fix lambda with fixed_effects_fit")
    zt, yt = demean_by_task(d.task, d.z), demean_by_task(d.task, d.y)
    unit = float(np.mean(np.einsum("ij,ij->j", zt, zt))) if d.m else 0.0
    if lambdas is None:
        grid = np.asarray(DEFAULT_RELATIVE_GRID) * unit
    else:
        grid = np.asarray(lambdas, dtype=float).ravel()
        if grid.size == 0 or not np.isfinite(grid).all() or (grid < 0).any():
            raise ValueError(f"lambdas: need a non-empty grid of finite values >= 0, got {list(grid)}")
    grid = np.unique(grid)  # ascending, no repeats
    mse = _fold_errors(d.task, zt, yt, grid) / d.n
    best = float(mse.min())
    tied = np.flatnonzero(mse <= best + TIE_RTOL * max(abs(best), 1e-300))
    lam = float(grid[tied.max()])
    fit = fixed_effects_fit(d.task, d.z, d.y, lam)
    return RidgeLOTO(coef=fit.coef, lam=lam, lambdas=grid, cv_mse=mse,
                     unpenalised=_fit_demeaned(zt, yt, 0.0), intercepts=fit.intercepts,
                     shrink_unit=unit, n=d.n, n_tasks=n_tasks)


#: Columns of :func:`with_without`'s table.
WITH_WITHOUT_COLUMNS = ("block", "n_with", "n_without", "mean_with", "mean_without",
                        "diff", "se", "lo", "hi", "pvalue")


def with_without(task: Sequence, z: Sequence | np.ndarray, y: Sequence[float] | np.ndarray, *,
                 level: float = 0.95, by_task: bool = False) -> pd.DataFrame:
    """Per block: mean success with it minus without it, Welch SE, Wald interval and p-value.

    ``se = sqrt(s1^2/n1 + s0^2/n0)`` (sample variances), interval ``diff +- z_{1-a/2} se``,
    two-sided normal p-value.  ``by_task=True`` subtracts each task's mean success first
    (the paper's ``y~``, with estimated task means); the default is the plain difference.
    A side with fewer than 2 episodes gives NaN for ``se``, the interval and the p-value.
    """
    d = inclusion_data(task, z, y)
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    yy = demean_by_task(d.task, d.y) if by_task else d.y
    q = float(_st.norm.ppf(0.5 + level / 2.0))
    rows = []
    for j in range(d.m):
        on, off = yy[d.z[:, j] == 1], yy[d.z[:, j] == 0]
        m1 = float(on.mean()) if on.size else np.nan
        m0 = float(off.mean()) if off.size else np.nan
        diff = m1 - m0
        if on.size >= 2 and off.size >= 2:
            se = float(np.sqrt(on.var(ddof=1) / on.size + off.var(ddof=1) / off.size))
            lo, hi = diff - q * se, diff + q * se
            p = float(2.0 * _st.norm.sf(abs(diff) / se)) if se > 0 else (1.0 if diff == 0 else 0.0)
        else:
            se = lo = hi = p = np.nan
        rows.append((j, int(on.size), int(off.size), m1, m0, diff, se, lo, hi, p))
    return pd.DataFrame(rows, columns=list(WITH_WITHOUT_COLUMNS))
