"""Curation within the token cap, and the choice among candidates with its tie rule."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
import pytest

from memtrials.curation.selection import best_full_candidates, choose, curate, rbc_candidates


def test_cap_is_respected_exactly_and_the_set_is_maximal():
    rng = np.random.default_rng(0)
    for _ in range(400):
        m = int(rng.integers(1, 10))
        est = rng.normal(size=m)
        tok = rng.integers(0, 200, m)
        budget = float(rng.choice([0.1, 0.25, 0.4, 0.57, 1.0]))
        for rule in ("skip", "stop"):
            c = curate(est, tok, budget=budget, rule=rule)
            cap = Fraction(str(budget)) * int(tok.sum())
            assert c.served_tokens == int(tok[list(c.blocks)].sum()) <= cap
            assert all(est[j] > 0 for j in c.blocks)
            assert list(c.blocks) == sorted(c.blocks, key=lambda j: -est[j])
            positive = sorted((j for j in range(m) if est[j] > 0), key=lambda j: -est[j])
            assert set(c.blocks) | set(c.skipped) == set(positive)
            if rule == "skip":  # no skipped block would have fitted at the end
                assert all(c.served_tokens + tok[j] > cap for j in c.skipped)
            else:  # a prefix of the positive blocks, largest first
                assert list(c.blocks) == positive[:len(c.blocks)]


def test_a_block_that_fills_the_cap_exactly_is_kept():
    # 0.57 x 100 is 56.99999999999999 in floating point; the cap is 57 tokens exactly
    c = curate([0.2, 0.1], [57, 43], budget=0.57)
    assert c.blocks == (0,) and c.served_tokens == 57 and c.cap_tokens == 57.0


def test_a_single_helpful_block_is_curated_to_that_block_alone():
    c = curate([-0.10, 0.20, -0.05, 0.0, -0.3], [10, 10, 10, 10, 10], budget=0.4)
    assert c.blocks == (1,) and c.served_tokens == 10 and c.skipped == ()  # the cap is a cap, not a target


def test_negative_and_zero_blocks_are_dropped_even_without_a_cap():
    c = curate([0.3, -0.2, 0.0, 0.1, -0.01], [50, 5, 5, 50, 5], budget=None)
    assert c.blocks == (0, 3) and c.cap_tokens is None
    assert curate([-0.1, -0.2], [5, 5]).blocks == ()
    assert curate([], []).blocks == ()


def test_skip_tries_the_next_smaller_block_and_stop_ends():
    est, tok = [0.3, 0.2, 0.1], [30, 50, 10]  # whole 90, cap at 0.45: 40.5
    skip = curate(est, tok, budget=0.45)
    assert skip.blocks == (0, 2) and skip.skipped == (1,) and skip.served_tokens == 40
    stop = curate(est, tok, budget=0.45, rule="stop")
    assert stop.blocks == (0,) and stop.skipped == (1, 2)
    # equal estimates are taken in block order; the inclusion vector serves the set
    tie = curate([0.1, 0.2, 0.2], [1, 1, 1], budget=1.0)
    assert tie.blocks == (1, 2, 0) and tie.included(3).tolist() == [1, 1, 1]


def test_curate_refuses_bad_input():
    with pytest.raises(ValueError, match="one of each per block"):
        curate([0.1], [1, 2])
    with pytest.raises(ValueError, match="NaN"):
        curate([np.nan], [1])
    with pytest.raises(ValueError, match="non-negative integer"):
        curate([0.1], [1.5])
    with pytest.raises(ValueError, match="budget"):
        curate([0.1], [1], budget=1.5)
    with pytest.raises(ValueError, match="rule"):
        curate([0.1], [1], rule="fill")


def scores_table(means: dict[str, list[float]]) -> pd.DataFrame:
    return pd.DataFrame([{"candidate": name, "episode": i, "score": v, "split": "practice"}
                         for name, vals in means.items() for i, v in enumerate(vals)])


def test_candidates_of_rbc_and_best_full():
    rbc = rbc_candidates(["r1", "r2", "r3"], [40, 30, 35], [100, 90, 80])
    assert [c.name for c in rbc] == ["curated:r1", "curated:r2", "curated:r3",
                                     "whole:r1", "whole:r2", "whole:r3", "none"]
    assert len(rbc) == 2 * 3 + 1 and rbc[-1].tokens == 0 and rbc[-1].run is None
    bf = best_full_candidates(["r1", "r2", "r3"], [100, 90, 80])
    assert [c.name for c in bf] == ["whole:r1", "whole:r2", "whole:r3", "none"]
    with pytest.raises(ValueError, match="one per run"):
        rbc_candidates(["r1", "r2"], [1], [1, 2])
    with pytest.raises(ValueError, match="distinct"):
        best_full_candidates(["r1", "r1"], [1, 2])


def test_the_highest_practice_score_is_served_and_best_full_reads_the_same_episodes():
    rbc = rbc_candidates(["a", "b"], [40, 30], [100, 90])
    table = scores_table({"curated:a": [1, 1, 1, 1], "curated:b": [0, 1, 0, 0], "whole:a": [1, 0, 1, 1],
                          "whole:b": [0, 0, 1, 0], "none": [0, 1, 1, 0]})
    pick = choose(rbc, table)
    assert pick.chosen.name == "curated:a" and pick.tied == ("curated:a",)
    assert pick.scores.set_index("name").loc["curated:a", "score"] == 1.0
    assert (pick.scores["n"] == 4).all()
    best_full = choose(best_full_candidates(["a", "b"], [100, 90]), table)
    assert best_full.chosen.name == "whole:a" and best_full.tied == ("whole:a",)
    assert list(best_full.scores["name"]) == ["whole:a", "whole:b", "none"]


def test_ties_go_to_fewer_tokens_then_candidate_order():
    rbc = rbc_candidates(["a", "b"], [40, 40], [100, 90])
    # curated:a, curated:b and whole:b tie at the top: fewest tokens (40) first, then order
    table = scores_table({"curated:a": [50, 70], "curated:b": [70, 50], "whole:a": [0, 20],
                          "whole:b": [60, 60], "none": [10, 0]})
    pick = choose(rbc, table)
    assert set(pick.tied) == {"curated:a", "curated:b", "whole:b"} and pick.chosen.name == "curated:a"
    # a tie with no playbook serves no playbook (0 tokens)
    table = scores_table({"whole:a": [1, 0], "whole:b": [0, 0], "none": [0, 1]})
    assert choose(best_full_candidates(["a", "b"], [100, 90]), table).chosen.name == "none"
    # float noise in the mean is not a difference
    table = scores_table({"whole:a": [0.1, 0.2], "whole:b": [0.0, 0.0], "none": [0.2, 0.1]})
    assert choose(best_full_candidates(["a", "b"], [100, 90]), table).chosen.name == "none"


def test_choose_refuses_evaluation_rows_and_unequal_episodes():
    cands = best_full_candidates(["a"], [10])
    table = scores_table({"whole:a": [1, 0], "none": [0, 1]})
    evaluation = table.assign(split=["practice", "evaluation", "practice", "practice"])
    with pytest.raises(ValueError, match="practice episodes only"):
        choose(cands, evaluation)
    with pytest.raises(ValueError, match="same non-empty episodes"):
        choose(cands, table.iloc[:3])
    with pytest.raises(ValueError, match="scored twice"):
        choose(cands, pd.concat([table, table.iloc[:1]]))
    with pytest.raises(ValueError, match="missing columns"):
        choose(cands, table.drop(columns="score"))
