"""The registered analysis recovers planted effects and applies its rules.

Simulated answers (memtrials.studies.luck.simulate) plant a known P2 / P3m; the
checks use the same code path as the pipeline (world values -> summaries -> readings).
Operating characteristics (detection and false-detection rates): test_luck_simulate.py.
"""

from __future__ import annotations

import gc
import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from memtrials.studies.luck.analysis import analyse, endpoint_primaries
from memtrials.studies.luck.contrasts import CONTRAST_BY_NAME, world_values, y_matrix
from memtrials.studies.luck.inference import REGISTERED_RULES, SUFFIX, summarize
from memtrials.studies.luck.simulate import simulate_answers
from memtrials.studies.luck.worlds import generate_worlds, worlds_frame

WORLDS = generate_worlds(20261009)
IDS = [w.world_id for w in WORLDS]
RULES = REGISTERED_RULES


@pytest.fixture(autouse=True, scope="module")
def _fast_gc():
    # statsmodels' Holm calls gc.collect(); freezing the live objects keeps it cheap
    gc.freeze()
    yield
    gc.unfreeze()


def _ymat(rng, **kw):
    return y_matrix(simulate_answers(WORLDS, "m", rng, **kw), IDS)


def test_planted_p3m_reads_the_mirror():
    rng = np.random.default_rng(13)
    readings, s = endpoint_primaries(_ymat(rng, p3m=0.30, discordance=0.0), RULES)
    assert readings["P3m"].word == "luck-carrying"
    assert readings["P2"].word == "bounded below 0.10"
    assert s["P3m"].estimate == pytest.approx(0.30, abs=0.08)


def test_zero_effect_constant_sample_gets_degenerate_interval_and_bound():
    readings, s = endpoint_primaries(_ymat(np.random.default_rng(0), discordance=0.0), RULES)
    p2 = s["P2"]
    assert p2.estimate == 0.0 and p2.degenerate
    q = 1 - 0.025 ** (1 / 256)
    assert (p2.lo, p2.hi) == pytest.approx((-2 * q, 2 * q))
    assert readings["P2"].word == "bounded below 0.10"


def test_outcome_dependent_when_the_swapped_lesson_moves_readers_too():
    """Raise both RB and RBx in the adverse cell: P2 and A2 positive, L2 about 0."""
    rng = np.random.default_rng(14)
    ans = simulate_answers(WORLDS, "m", rng, p2=0.3, discordance=0.0)
    sel = (ans.decision == "good") & (ans.outcome == "failure") & (ans.arm == "RBx")
    ans.loc[sel, "y"] = (rng.random(sel.sum()) < 0.3).astype(float)
    readings, s = endpoint_primaries(y_matrix(ans, IDS), RULES)
    assert readings["P2"].detected and readings["P2"].word == "outcome-dependent"


def test_few_complete_worlds_is_descriptive_only():
    small = replace(RULES, min_complete=300)
    readings, _ = endpoint_primaries(_ymat(np.random.default_rng(1), p2=0.3), small)
    assert readings["P2"].word == "descriptive only" and readings["P3m"].word == "descriptive only"


def test_missing_answers_bounds_and_suffix():
    rng = np.random.default_rng(15)
    ans = simulate_answers(WORLDS, "m", rng, p2=0.10, discordance=0.0)
    y = y_matrix(ans, IDS)
    c = CONTRAST_BY_NAME["P2"]
    # drop the failure/RB answer of 40 worlds in which it was the worse tool
    hit = y.index[y[("good", "failure", "RB")] == 1][:40]
    y.loc[hit, ("good", "failure", "RB")] = np.nan
    wv = world_values(y, c)
    assert wv.complete.sum() == 256 - len(hit)
    assert (wv.lower[hit] == wv.value.fillna(0)[hit] - 0).all()  # lower bound: the missing Y set to 0
    assert (wv.upper[hit] >= wv.lower[hit] + 1).all()
    readings, s = endpoint_primaries(y, RULES)
    # complete cases alone show nothing; the upper bound is far above 0.10
    assert readings["P2"].word in ("bounded below 0.10", "unresolved")
    if readings["P2"].word == "bounded below 0.10":
        assert readings["P2"].suffix == SUFFIX and readings["P2"].bound_check == "failed"


def test_panel_averaging_rule_by_hand():
    rng = np.random.default_rng(16)
    worlds = WORLDS[:32]
    wf = worlds_frame(worlds)
    parts = [simulate_answers(worlds, f"e{i}", rng, p2=0.2 * i, discordance=0.05) for i in range(3)]
    ans = pd.concat(parts, ignore_index=True)
    # e2 misses world 0 entirely; e1 misses world 1's adverse RB answer
    ans.loc[(ans.model == "e2") & (ans.world_id == worlds[0].world_id), "y"] = np.nan
    ans.loc[(ans.model == "e1") & (ans.world_id == worlds[1].world_id) & (ans.decision == "good")
            & (ans.outcome == "failure") & (ans.arm == "RB"), "y"] = np.nan
    rules = replace(RULES, min_complete=1, panel_min_endpoints=2)
    a = analyse(ans, wf, rules)
    c = CONTRAST_BY_NAME["P2"]
    per = pd.DataFrame({m: world_values(y_matrix(ans[ans.model == m], list(wf.world_id)), c).value
                        for m in ("e0", "e1", "e2")})
    keep = per.notna().sum(axis=1) >= 2
    expected = per[keep].mean(axis=1).mean()
    got = a.quantities.query("unit == 'panel' and quantity == 'P2' and subset == 'all'").iloc[0]
    assert got.estimate == pytest.approx(expected) and got.n == int(keep.sum())
    # with 3 endpoints required, world 0 and world 1 drop out
    a3 = analyse(ans, wf, replace(RULES, min_complete=1, panel_min_endpoints=3))
    got3 = a3.quantities.query("unit == 'panel' and quantity == 'P2' and subset == 'all'").iloc[0]
    assert got3.n == 30
    # the panel's cell rate is the mean of the endpoints' rates
    r = a.cell_rates.query("decision == 'good' and outcome == 'failure' and arm == 'RB'")
    assert r[r.unit == "panel"].rate.iloc[0] == pytest.approx(r[r.unit != "panel"].rate.mean())
    # ... and its interval is one for that mean (not the pooled counts' Wilson interval)
    from memtrials.stats.rates import mean_of_rates

    ends, pan = r[r.unit != "panel"], r[r.unit == "panel"].iloc[0]
    iv = mean_of_rates(list(ends.worse), list(ends.counted))
    assert (pan.lo, pan.hi) == pytest.approx((iv.lo, iv.hi)) and pan.lo <= pan.rate <= pan.hi
    assert pan.interval.startswith("mean of rates")
    assert a.coverage.query("quantity == 'P2'").worlds.sum() == 32


def test_remedy_credit_and_cue_split():
    rng = np.random.default_rng(17)
    worlds = WORLDS
    ans = simulate_answers(worlds, "m", rng, p2=0.3, discordance=0.0)
    # RBD lessons move nobody: the remedy removes the effect
    a = analyse(ans, worlds_frame(worlds), replace(RULES, panel_min_endpoints=1))
    rem = a.remedies.query("unit == 'm' and remedy == 'RBD' and contrast == 'P2'").iloc[0]
    assert rem.credited and rem.dP == pytest.approx(-0.3, abs=0.08)
    bad = a.remedies.query("unit == 'm' and remedy == 'RBD' and contrast == 'P3m'").iloc[0]
    assert not bad.credited
    q = a.quantities.query("unit == 'm' and quantity == 'P2'")
    assert set(q.subset) == {"all", "cue=explicit", "cue=implicit"}
    assert q.set_index("subset").n[["cue=explicit", "cue=implicit"]].sum() == 256
    sus = a.quantities.query("unit == 'm' and quantity == 'Sus' and subset == 'all'").iloc[0]
    assert sus.estimate == 0.0 and sus.degenerate
    labels = set(a.readings.label)
    assert "luck-carrying" in labels
    assert math.isfinite(a.cell_rates.rate.iloc[0])


def test_remedy_rule_null_and_planted():
    """Credited only when both the P and the A difference lie below 0: rarely when the
    remedy's lessons move readers as much as RB's, almost always when they move nobody."""
    rng = np.random.default_rng(18)
    dp, da = CONTRAST_BY_NAME["dP2[RBD-RB]"], CONTRAST_BY_NAME["dA2[RBD-RB]"]

    def credited(y):
        out = []
        for c in (dp, da):
            v = world_values(y, c).value.dropna().to_numpy()
            out.append(summarize(v, c.support, RULES).hi < 0)
        return all(out)

    reps = 60
    null = sum(credited(_ymat(rng, p2=0.2, discordance=0.02, lesson_arms=("RB", "RBD", "N")))
               for _ in range(reps))
    planted = sum(credited(_ymat(rng, p2=0.2, discordance=0.02)) for _ in range(reps))
    assert null / reps <= 0.05
    assert planted / reps >= 0.9


def test_ceiling_flag():
    rng = np.random.default_rng(19)
    ans = simulate_answers(WORLDS, "m", rng, discordance=0.0)
    sel = (ans.decision == "good") & (ans.outcome == "failure") & (ans.arm == "NEUTRAL")
    ans.loc[sel, "y"] = (rng.random(sel.sum()) < 0.95).astype(float)
    readings, _ = endpoint_primaries(y_matrix(ans, IDS), RULES)
    assert readings["P2"].ceiling and "[adverse cell at ceiling]" in readings["P2"].label()
    assert not readings["P3m"].ceiling


def test_a_primary_with_no_complete_world_stays_in_the_holm_family():
    """P3m has no complete world: it counts as p = 1, and P2 is adjusted for a family of two."""
    rng = np.random.default_rng(20)
    y = _ymat(rng, p2=0.10, discordance=0.02)
    y[("bad", "success", "RB")] = np.nan
    readings, s = endpoint_primaries(y, RULES)
    assert s["P3m"].n == 0 and readings["P3m"].word == "descriptive only"
    assert readings["P3m"].p_t_holm == 1.0 and not readings["P3m"].detected
    assert readings["P2"].p_t_holm == pytest.approx(min(1.0, 2 * s["P2"].p_t))
    assert readings["P2"].p_bet_holm == pytest.approx(min(1.0, 2 * s["P2"].p_bet_pos))
