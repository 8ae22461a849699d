"""Holm over the registered family of two primaries, including a primary with no
complete world (it counts as p = 1 and keeps the family at two)."""

from __future__ import annotations

import gc
import math

import numpy as np
import pytest

from memtrials.stats import holm


def test_holm_by_hand():
    assert holm([0.01, 0.04]) == pytest.approx([0.02, 0.04])
    assert holm([0.03, 0.02]) == pytest.approx([0.04, 0.04])  # step-down keeps monotonicity
    assert holm([0.2, 0.001, 0.04]) == pytest.approx([0.2, 0.003, 0.08])
    assert holm([]) == []


def test_a_missing_primary_counts_as_not_rejected_in_a_family_of_two():
    adj = holm([0.03, math.nan])
    assert adj == pytest.approx([0.06, 1.0])  # not 0.03: the family is still two
    assert adj[0] > 0.05  # so 0.03 alone no longer detects, as registered
    assert holm([math.nan, math.nan]) == [1.0, 1.0]
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        holm([1.5, 0.1])


def test_family_wise_error_with_a_missing_member_by_simulation():
    """Under the null, with one member missing, Holm over the family of two rejects the
    other at most alpha/2 of the time (Bonferroni for a family of two); dropping the
    missing member would reject it about alpha of the time."""
    rng = np.random.default_rng(0)
    reps = 2000
    p = rng.random(reps)  # uniform null p-values
    gc.freeze()  # statsmodels' multipletests calls gc.collect()
    try:
        rejected = np.mean([holm([x, math.nan])[0] < 0.05 for x in p])
    finally:
        gc.unfreeze()
    se = math.sqrt(0.025 * 0.975 / reps)
    assert abs(rejected - 0.025) < 4 * se
    assert rejected < 0.05 - 3 * math.sqrt(0.05 * 0.95 / reps)
