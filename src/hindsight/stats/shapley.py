"""DG-Mem's estimator: each block's subset-Shapley value from a randomized-inclusion design.

The playbook-curation paper compares RBC's ridge with "DG-Mem's subset-Shapley estimate",
computed per block from the same practice episodes and served by RBC's rule (its Appendix
A.4 and E.2; Table 9).  Neither paper prints the estimator, and no public code exists
(``memory-systems.md``), so it is implemented here from the definition of the Shapley
value of a block ``j`` among ``m`` blocks with value ``V`` (Shapley, 1953)::

    phi_j = sum_{T subset of [m] minus j} |T|! (m - |T| - 1)! / m! * (V(T + j) - V(T))
          = (1/m) sum_{s=0}^{m-1} E_{T uniform among the size-s subsets}[V(T + j) - V(T)]

Every size ``s`` of the other blocks weighs ``1/m``.  (The Banzhaf value that RBC's
regression estimates weighs every subset alike instead, so sizes near ``(m-1)/2`` dominate;
the two agree when effects add, and differ for interactions of three or more blocks.)

Estimation (choices of ours, stated).  Under independent Bernoulli(p) inclusion, given
``z_j`` and the number ``s`` of other blocks included, the other blocks served are a
uniformly random size-``s`` subset, independent of the task.  So the stratum difference
``D_js = mean(y | z_j = 1, s) - mean(y | z_j = 0, s)`` is unbiased for the size-``s``
term, and :func:`subset_shapley` returns ``(1/|S_j|) sum_{s in S_j} D_js`` over the
sizes ``S_j`` where both sides hold an episode.  A size with an empty side is dropped and
the weights renormalised (recorded in ``strata_missing``; at m = 8 and p = 1/2 the sizes
0 and 7 hold 1/128 of the episodes each, which is why this estimator is noisier than the
ridge).  ``by_task=True`` (default) first subtracts from each success the mean of the
*other* episodes of its task (a task with one episode: the mean of every other episode),
which removes task difficulty as the ridge's intercepts do and keeps every stratum
difference unbiased over the randomization (the subtracted mean does not depend on the
episode's own inclusions).  The standard error pools the within-cell variance of the
block's ``2m`` cells (so one-episode cells still count) and treats the strata as
independent: ``se = sqrt(sum_s s2 (1/n_on,s + 1/n_off,s)) / |S_j|``; the interval is
``estimate +- z se``.

Exact values for a known ``V`` (:func:`shapley_values`, :func:`banzhaf_values`) are what
the simulation tests plant.
"""

from __future__ import annotations

import itertools
import math
from typing import Callable, Sequence

import numpy as np
import pandas as pd
from scipy import stats as _st

from hindsight.stats.inclusion import inclusion_data

#: Columns of :func:`subset_shapley`'s table, one row per block.
SHAPLEY_COLUMNS = ("block", "estimate", "se", "lo", "hi", "strata_used", "strata_missing", "n_with", "n_without")


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


def loo_task_demean(task: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each success minus the mean of the other episodes of its task (alone in its task: of all others)."""
    codes, uniques = pd.factorize(np.asarray(task))
    sums = np.bincount(codes, weights=y, minlength=len(uniques))
    counts = np.bincount(codes, minlength=len(uniques))
    n, total = y.size, float(y.sum())
    own = counts[codes]
    other_task = np.where(own > 1, (sums[codes] - y) / np.maximum(own - 1, 1), np.nan)
    other_all = (total - y) / max(n - 1, 1)
    return y - np.where(own > 1, other_task, other_all)


def subset_shapley(task: Sequence, z: Sequence | np.ndarray, y: Sequence[float] | np.ndarray, *,
                   by_task: bool = True, level: float = 0.95) -> pd.DataFrame:
    """Per block: the subset-Shapley estimate, its standard error and interval (module docstring).

    ``task``, ``z`` (episodes x blocks, 0/1) and ``y`` are one practice round, as for
    :func:`hindsight.stats.inclusion.ridge_loto`.  A block with no stratum holding both an
    episode with it and one without gets NaN (and ``strata_used = 0``).
    """
    d = inclusion_data(task, z, y)
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if d.n < 2 and by_task:
        raise ValueError("subset_shapley: by_task needs at least 2 episodes (each is centred on the others)")
    yy = loo_task_demean(d.task, d.y) if by_task else d.y
    q = float(_st.norm.ppf(0.5 + level / 2.0))
    m = d.m
    zi = d.z.astype(int)
    size = zi.sum(1)
    rows = []
    for j in range(m):
        others = size - zi[:, j]
        cell = others * 2 + zi[:, j]  # 2m cells: (size of the others, z_j)
        counts = np.bincount(cell, minlength=2 * m)
        sums = np.bincount(cell, weights=yy, minlength=2 * m)
        means = np.divide(sums, counts, out=np.zeros(2 * m), where=counts > 0)
        resid = yy - means[cell]
        dof = d.n - int((counts > 0).sum())
        s2 = float(resid @ resid) / dof if dof > 0 else np.nan
        diffs, var, missing = [], 0.0, []
        for s in range(m):
            n_off, n_on = counts[2 * s], counts[2 * s + 1]
            if n_on and n_off:
                diffs.append(means[2 * s + 1] - means[2 * s])
                var += s2 * (1.0 / n_on + 1.0 / n_off)
            else:
                missing.append(s)
        k = len(diffs)
        est = float(np.mean(diffs)) if k else np.nan
        se = float(np.sqrt(var) / k) if k and np.isfinite(s2) else np.nan
        rows.append((j, est, se, est - q * se, est + q * se, k, ",".join(map(str, missing)),
                     int(zi[:, j].sum()), int(d.n - zi[:, j].sum())))
    return pd.DataFrame(rows, columns=list(SHAPLEY_COLUMNS))
