"""World generator: every registered constraint holds on every world, over many seeds."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memtrials.studies.luck.domains import DOMAIN_BY_KEY
from memtrials.studies.luck.names import english_words, name_conflicts
from memtrials.studies.luck.worlds import (
    LOG_LENGTHS, acceptance_margin, generate_worlds, posterior_mean, worlds_frame,
    worlds_from_frame,
)


def _check(worlds, n_domains, per_domain):
    df = worlds_frame(worlds)
    assert len(df) == n_domains * per_domain and df.world_id.is_unique
    assert df.domain.nunique() == n_domains
    words = english_words()
    for w in worlds:
        n = w.n_runs
        assert n in LOG_LENGTHS
        rb, rw = w.better_successes / n, w.worse_successes / n
        assert 0.80 <= rb <= 0.93 and 0.50 <= rw <= 0.70 and rb - rw >= 0.15 - 1e-12
        # acceptance rule with the uniform prior
        after_fail = (w.better_successes + 1) / (n + 1 + 2)
        after_succ = (w.worse_successes + 1 + 1) / (n + 1 + 2)
        assert after_fail - after_succ >= 0.10
        assert acceptance_margin(w.better_successes, w.worse_successes, n) == pytest.approx(after_fail - after_succ)
        # coined names
        assert w.better_name[0] != w.worse_name[0]
        dom = DOMAIN_BY_KEY[w.domain]
        for name in (w.better_name, w.worse_name):
            assert name not in words and name_conflicts(name, dom.texts()) is None
            assert name not in dom.texts().lower()
        assert w.better_tool == f"{dom.verb}_via_{w.better_name}"
        assert w.error_text in dom.errors
    # balance within each domain
    for _, g in df.groupby("domain"):
        cells = g.groupby(["better_position", "cue"]).size()
        assert len(cells) == 4 and cells.nunique() == 1
        if per_domain == 16:
            assert g.groupby(["better_position", "cue"]).n_runs.nunique().eq(4).all()
    assert (df.cue == "explicit").sum() == len(df) // 2
    assert df.better_name.is_unique and df.worse_name.is_unique


@pytest.mark.parametrize("seed", [0, 1, 7, 20261009, 20261130, 99991])
def test_constraints_hold_on_every_world(seed):
    _check(generate_worlds(seed), 16, 16)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), nd=st.integers(1, 16), k=st.integers(1, 4))
def test_property_constraints_hold_over_seeds_and_sizes(seed, nd, k):
    _check(generate_worlds(seed, n_domains=nd, worlds_per_domain=4 * k), nd, 4 * k)


@pytest.mark.parametrize("seed,nd,pd_", [(3, 4, 4), (11, 2, 8), (12, 16, 4)])
def test_reduced_designs(seed, nd, pd_):
    _check(generate_worlds(seed, n_domains=nd, worlds_per_domain=pd_), nd, pd_)


def test_deterministic_and_round_trip():
    a = worlds_frame(generate_worlds(5, 4, 4))
    b = worlds_frame(generate_worlds(5, 4, 4))
    pd.testing.assert_frame_equal(a, b)
    assert worlds_frame(worlds_from_frame(a)).equals(a)
    assert not a.equals(worlds_frame(generate_worlds(6, 4, 4)))


def test_acceptance_rule_rejects_a_narrow_world():
    # a 0.80 vs 0.70 world over 180 runs fails the rule; the registered ranges pass
    assert acceptance_margin(144, 126, 180) < 0.10
    assert posterior_mean(0, 0) == 0.5


def test_bad_sizes_are_named():
    with pytest.raises(ValueError, match="luck.worlds.per_domain"):
        generate_worlds(1, 4, 6)
    with pytest.raises(ValueError, match="luck.worlds.domains"):
        generate_worlds(1, 17, 4)
    with pytest.raises(ValueError, match="missing columns"):
        worlds_from_frame(pd.DataFrame({"world_id": ["x"]}))


def test_world_ids_are_ours_and_interleave_domains():
    import re
    from collections import Counter

    from memtrials.studies.luck.worlds import id_prefix

    ws = generate_worlds(20261009)
    ids = [w.world_id for w in ws]
    # our own scheme: never the paper's w<seed>_NNNN, and the seed's digits do not appear
    assert all(re.fullmatch(r"lk-[0-9a-f]{6}-\d{4}", i) for i in ids)
    assert not any(re.fullmatch(r"w\d{8}_\d{4}", i) or "20261009" in i for i in ids)
    assert id_prefix(20261009) != id_prefix(20261130)
    # id order = index order = string order
    assert ids == sorted(ids) and [w.index for w in ws] == list(range(256))
    # every run of 16 consecutive ids holds every domain once
    for r in range(16):
        assert {w.domain for w in ws[16 * r:16 * (r + 1)]} == {w.domain for w in ws}
    # the domain that leads a round is a seeded draw, not a fixed domain
    leaders = Counter(ws[16 * r].domain for r in range(16))
    assert len(leaders) >= 6
    # a "first world in id order with property X" rule does not favour one domain: over
    # seeds, the first world of each seed is spread over the domains
    firsts = Counter(generate_worlds(s, 16, 4)[0].domain for s in range(40))
    assert len(firsts) >= 10 and max(firsts.values()) <= 10


def test_interleaving_keeps_the_worlds_content():
    """The id order is a reordering: the same worlds as a domain-by-domain generation."""
    from memtrials.studies.luck.worlds import interleave

    by = [[{"domain": d, "k": k} for k in range(3)] for d in "abc"]
    out = interleave(by, 1)
    assert sorted((x["domain"], x["k"]) for x in out) == [(d, k) for d in "abc" for k in range(3)]
    assert [x["k"] for x in out] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
