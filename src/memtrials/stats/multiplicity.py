"""Multiplicity adjustment: Holm's step-down procedure (Holm 1979) via statsmodels, over a
registered family whose size does not shrink when a member has no p-value.

*Lessons from Luck* (section 4, "Inference") registers the family as the two primaries.
A primary with no complete world has no test; it stays in the family as not rejected
(p = 1), so the other primary is still adjusted for a family of two, as registered.
Dropping it instead would halve the other's adjustment after the fact.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
from statsmodels.stats.multitest import multipletests


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values of one registered family, in the input order.

    A missing p-value (NaN: a member with no complete unit) counts as p = 1: it is never
    rejected and keeps its place in the family.  An empty family gives an empty list.
    """
    p = np.asarray(pvalues, dtype=float)
    if p.size == 0:
        return []
    if ((p[~np.isnan(p)] < 0) | (p[~np.isnan(p)] > 1)).any():
        raise ValueError(f"holm: p-values must lie in [0, 1], got {list(p)}")
    p = np.where(np.isnan(p), 1.0, p)
    return [float(x) for x in multipletests(p, method="holm")[1]]
