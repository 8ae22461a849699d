"""DG-Mem's estimator: each block's subset-Shapley value from a randomized-inclusion design.

The playbook-curation paper compares RBC's ridge with "DG-Mem's subset-Shapley estimate",
computed per block from the same practice episodes and served by RBC's rule (its Appendix
A.4 and E.2; Table 9).  Neither paper prints the estimator, and no public code exists
(``memory-systems.md``), so it is implemented here from the definition of the Shapley
value of a block ``j`` among ``m`` blocks with value ``V`` (Shapley, 1953)::

    phi_j = sum_{T subset of [m] minus j} |T|! (m - |T| - 1)! / m! * (V(T + j) - V(T))
          = (1/m) sum_{s=0}^{m-1} D_js,   D_js = E_{T uniform among the size-s subsets}[V(T + j) - V(T)]

Every size ``s`` of the other blocks weighs ``1/m``.  (The Banzhaf value that RBC's
regression estimates at p = 1/2 weighs every subset alike instead, so sizes near
``(m-1)/2`` dominate; the two agree when effects add, and differ when ``D_js`` bends in
``s``, as with interactions of three or more blocks.)

Estimation: inverse-probability weighting with the design's known probabilities.  Under
independent Bernoulli(p) inclusion (the practice round's design, ``curation.design``; p =
1/2 per run, 1/K in the pooled round) block ``j`` is served with probability ``p`` and,
independently, the number ``s`` of other blocks served has the binomial probability
``pi_s = C(m-1, s) p^s (1-p)^(m-1-s)`` (:func:`size_probabilities`), the served others of
that size being a uniform subset.  Hence, for episode ``i`` with ``s_i`` others served,::

    w_ij = (z_ij / p - (1 - z_ij) / (1 - p)) / pi_{s_i}
    phi_hat_j = (1/n) sum_i (y_i - g_ij) w_ij / m

is **exactly unbiased** for ``phi_j`` over the randomization, for every ``V`` and every
round size, with no size dropped and no reweighting: a size that holds no episode in a
round contributes zero to that round, and is paid for by the large weights it gets in the
rounds that do hold one (``E[1{s_i = s} / pi_s] = 1``).  ``g_ij`` is a baseline that may
depend on anything except episode ``i``'s own ``z_ij`` (``E[w_ij | everything else] = 0``,
so it cancels in expectation); it only lowers the variance.  Ours (a choice, stated):
episode ``i``'s leave-one-out prediction from a least-squares fit, on the other episodes,
of success on task intercepts (``by_task``; else one intercept), the other blocks'
inclusions ``z_{-j}`` and one indicator per size ``s``; where episode ``i`` is alone in
that model's reach (leverage 1, e.g. the only episode of its size) the fit without the
size indicators, then the mean of the other episodes.  The prediction uses episode ``i``'s
task and ``z_{i,-j}`` and the other episodes' data, never ``z_ij``, so the estimate stays
unbiased.  The standard error treats the ``n`` terms as independent:
``se = sd(u) / sqrt(n)`` with ``u_i = (y_i - g_ij) w_ij / m``; the interval is
``estimate +- z se``.

Price of the definition: the extreme sizes weigh ``1/m`` each but hold ``pi_0 = (1-p)^(m-1)``
of the episodes (1/128 at m = 8, p = 1/2), so the estimate is much noisier than the ridge,
which weighs sizes by how often they occur.  The table records, per block, the sizes that
held no episode with the block or none without it in this round (``strata_missing``) and
the Shapley weight they carry (``weight_missing = k/m``): their terms in this round are 0
or one-sided, which is unbiased over rounds but says nothing about those sizes in this
one.

Exact values for a known ``V`` (:func:`shapley_values`, :func:`banzhaf_values`) are what
the simulation tests plant (``tests/stats/test_shapley.py``).
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as _st

from memtrials.stats.inclusion import inclusion_data

#: Columns of :func:`subset_shapley`'s table, one row per block.
SHAPLEY_COLUMNS = ("block", "estimate", "se", "lo", "hi", "strata_used", "strata_missing", "weight_missing",
                   "n_with", "n_without")

#: Leverage at or above ``1 - LEVERAGE_TOL`` means an episode's leave-one-out prediction is not identified.
LEVERAGE_TOL = 1e-9


def _subsets(m: int, without: int) -> list[frozenset[int]]:
    others = [k for k in range(m) if k != without]
    return [frozenset(c) for r in range(len(others) + 1) for c in itertools.combinations(others, r)]


def shapley_values(value: Callable[[frozenset[int]], float], m: int) -> np.ndarray:
    """The exact Shapley value of each of ``m`` blocks for the set function ``value`` (2^m calls)."""
    if m < 1:
        raise ValueError(f"shapley_values: need at least one block, got m = {m}")
    cache: dict[frozenset[int], float] = {}

    def v(t: frozenset[int]) -> float:
        if t not in cache:
            cache[t] = float(value(t))
        return cache[t]

    out = np.zeros(m)
    for j in range(m):
        for t in _subsets(m, j):
            w = math.factorial(len(t)) * math.factorial(m - len(t) - 1) / math.factorial(m)
            out[j] += w * (v(t | {j}) - v(t))
    return out


def banzhaf_values(value: Callable[[frozenset[int]], float], m: int) -> np.ndarray:
    """The exact Banzhaf value (every subset of the other blocks weighs ``2^-(m-1)``)."""
    if m < 1:
        raise ValueError(f"banzhaf_values: need at least one block, got m = {m}")
    out = np.zeros(m)
    for j in range(m):
        subs = _subsets(m, j)
        out[j] = float(np.mean([value(t | {j}) - value(t) for t in subs]))
    return out


def size_probabilities(m: int, p: float) -> np.ndarray:
    """``pi_s``, s = 0..m-1: the probability that ``s`` of a block's ``m - 1`` others are served."""
    if not 0 < p < 1:
        raise ValueError(f"p (inclusion probability): must lie in (0, 1), got {p}")
    return _st.binom.pmf(np.arange(m), m - 1, p)


def loo_predictions(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each row's prediction from the least-squares fit of ``y`` on ``x`` without that row
    (``(yhat_i - h_ii y_i) / (1 - h_ii)``, exact for any rank); NaN where ``h_ii`` is 1."""
    u, s, _ = np.linalg.svd(x, full_matrices=False)
    u = u[:, s > s.max() * max(x.shape) * np.finfo(float).eps] if s.size and s.max() > 0 else u[:, :0]
    h = np.einsum("ij,ij->i", u, u)
    fitted = u @ (u.T @ y)
    ok = h < 1 - LEVERAGE_TOL
    out = np.full(y.shape, np.nan)
    out[ok] = (fitted[ok] - h[ok] * y[ok]) / (1 - h[ok])
    return out


def baseline(task: np.ndarray, z: np.ndarray, y: np.ndarray, j: int, *, by_task: bool = True) -> np.ndarray:
    """``g_ij`` of the module docstring: leave-one-out predictions that never read ``z_ij``."""
    n, m = z.shape
    others = np.delete(z, j, axis=1)
    size = others.sum(1).astype(int)
    if by_task:
        codes, uniques = pd.factorize(task)
        base = np.eye(len(uniques))[codes]
    else:
        base = np.ones((n, 1))
    full = np.hstack([base, others, np.eye(m)[size]])
    g = loo_predictions(full, y)
    for x in (np.hstack([base, others]), np.ones((n, 1))):
        gap = np.isnan(g)
        if not gap.any():
            break
        g[gap] = loo_predictions(x, y)[gap]
    return np.nan_to_num(g, nan=0.0)  # n = 1: no other episode; 0 keeps the estimate unbiased


def subset_shapley(task: Sequence, z: Sequence | np.ndarray, y: Sequence[float] | np.ndarray, *, p: float = 0.5,
                   by_task: bool = True, level: float = 0.95) -> pd.DataFrame:
    """Per block: the subset-Shapley estimate, its standard error and interval (module docstring).

    ``task``, ``z`` (episodes x blocks, 0/1) and ``y`` are one practice round, as for
    :func:`memtrials.stats.inclusion.ridge_loto`, and ``p`` is the round's inclusion
    probability (the estimate weighs episodes by the design's known probabilities, so
    it must be the one the round was drawn with).
    """
    d = inclusion_data(task, z, y)
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    m, n = d.m, d.n
    pi = size_probabilities(m, p)
    q = float(_st.norm.ppf(0.5 + level / 2.0))
    zi = d.z.astype(int)
    size = zi.sum(1)
    rows = []
    for j in range(m):
        zj = zi[:, j]
        s = size - zj
        w = (zj / p - (1 - zj) / (1 - p)) / pi[s]
        u = (d.y - baseline(d.task, d.z, d.y, j, by_task=by_task)) * w / m
        est = float(u.mean()) if n else np.nan
        se = float(u.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan
        on = np.bincount(s[zj == 1], minlength=m)
        off = np.bincount(s[zj == 0], minlength=m)
        missing = [k for k in range(m) if not (on[k] and off[k])]
        rows.append((j, est, se, est - q * se, est + q * se, m - len(missing), ",".join(map(str, missing)),
                     len(missing) / m, int(zj.sum()), int(n - zj.sum())))
    return pd.DataFrame(rows, columns=list(SHAPLEY_COLUMNS))
