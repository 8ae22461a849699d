"""Issue 36 (anti-persistence): the sweep rows at the main settings are the main row; mode
shares averaged over rounds; the main table reads each job's final-round evaluation and the
round curves its held-out evaluations; the error-reproduction counts follow the declared
definitions, and the association statistic is checked by simulation."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from memtrials.stats import rate_difference
from memtrials.studies.antipersist import analysis, lineage, report


def eval_rows(rates, rounds=(1, 2), seeds=2, n=50, rng=None):
    rng = rng or np.random.default_rng(3)
    return pd.DataFrame([{"design": d, "model": "m", "env": "alfworld", "seed_index": s, "round": r,
                          "won": bool(rng.random() < p[r]), "llm_calls": 1, "synthesis_calls_total": 0,
                          "execution_calls": 1}
                         for d, p in rates.items() for s in range(1, seeds + 1) for r in rounds for _ in range(n)])


def test_sweep_rows_at_the_main_settings_are_the_main_row():
    ev = eval_rows({"antipersist": {1: 0.2, 2: 0.6}, "antipersist-gamma-0.98": {1: 0.1, 2: 0.3}})
    summary, average = analysis.success(ev)
    main = report.success_matrix(summary, average, ["antipersist"]).iloc[0]
    plan = [["gamma", 0.98, "antipersist-gamma-0.98"], ["gamma", 0.998, "antipersist"], ["lambda", 0.05, "antipersist"]]
    sweeps = report.sweep_table(summary, average, plan).set_index("design")
    for row in ("γ = 0.998", "λ = 0.05"):
        assert sweeps.loc[row, "m / alfworld"] == main["m / alfworld"] and sweeps.loc[row, "cells"] == "antipersist"
    assert sweeps.loc["γ = 0.98", "m / alfworld"] != main["m / alfworld"]


def test_main_estimate_is_the_final_round_and_curves_are_held_out():
    ev = eval_rows({"a": {1: 0.0, 2: 1.0}})
    summary, _ = analysis.success(ev)
    assert summary["mean"].tolist() == [1.0]  # the final snapshot's evaluation only
    curve = analysis.heldout_per_round(ev)
    assert curve["round"].tolist() == [1, 2] and curve["success"].tolist() == [0.0, 1.0]


def test_mode_shares_average_over_rounds_counts_absent_modes_as_zero():
    tr = pd.DataFrame([{"design": "antipersist", "model": "m", "env": "e", "round": r, "mode": m}
                       for r, modes in ((1, ["none", "none", "imitation", "imitation"]), (2, ["none"] * 4))
                       for m in modes])
    avg = analysis.mode_shares_average(tr).set_index("mode")
    assert avg.loc["none", "share"] == pytest.approx(0.75) and avg.loc["imitation", "share"] == pytest.approx(0.25)
    assert (avg["rounds"] == 2).all() and avg["share"].sum() == pytest.approx(1.0)


def served(*ids):
    return json.dumps([{"id": i, "cosine": 0.9} for i in ids])


def test_lineage_counts_follow_the_declared_definitions():
    # stream success 2/5 = 0.4; R1 served in two failures -> flagged; R2 served in two wins -> not
    train = pd.DataFrame({"design": "abstraction", "model": "m", "env": "e", "seed_index": 1,
                          "episode_id": ["e1", "e2", "e3", "e4", "e5"], "won": [False, False, False, True, True],
                          "retrieval": ["[]", served("R00001"), served("R00001", "T00001"), served("R00002"),
                                        served("R00002", "R00003")]})
    state = {"abstraction": {"lineage": [
        {"episode_id": "e1", "parents": [], "generated": [{"id": "R00001", "admitted": True}]},
        {"episode_id": "e2", "parents": ["R00001"], "generated": [{"id": "R00002", "admitted": True},
                                                                  {"id": "R00001", "admitted": False}]},
        {"episode_id": "e3", "parents": ["R00001"], "generated": [{"id": "R00003", "admitted": True},
                                                                  {"id": "R00004", "admitted": True}]},
    ]}}
    c = lineage.stream_counts(state, train)
    # R3 served once, in a win: not flagged; R4 never served: unlabelled
    assert c == {"syntheses": 3, "exposed": 2, "gen_exposed": 3, "flagged_exposed": 1, "gen_unexposed": 1,
                 "flagged_unexposed": 1, "flagged_generated": 2, "flagged_admitted": 1, "unlabelled": 1}
    snaps = [{"design": "joint", "model": "m", "env": "e", "seed_index": 1, "state": state}]
    rates = lineage.rates(lineage.counts(snaps, train.assign(design="joint")))
    assert set(rates["setting"]) == {"m / e", "all"}
    row = rates.iloc[0]
    assert row["exposure"] == pytest.approx(2 / 3) and row["admission"] == pytest.approx(0.5)
    assert row["association"] == pytest.approx(1 / 3 - 1.0)


def simulate_stream(rng, p_exposed, p_unexposed, n_syntheses=200, uses=5):
    """A stream whose rules are bad with probability p_exposed when the synthesis read an
    episode served a bad rule, else p_unexposed; an episode served a bad rule wins with 0.2,
    otherwise 0.7; every rule is served in a few later episodes (labels from those)."""
    rules, bad, lin, eps = [], {}, [], []
    for i in range(n_syntheses):
        parents = [str(rng.choice(rules))] if rules else []
        won = rng.random() < (0.2 if any(bad[p] for p in parents) else 0.7)
        eps.append({"episode_id": f"e{i}", "won": bool(won), "retrieval": served(*parents)})
        rid = f"R{i + 1:05d}"
        bad[rid] = rng.random() < (p_exposed if any(bad[p] for p in parents) else p_unexposed)
        rules.append(rid)
        lin.append({"episode_id": f"e{i}", "parents": parents, "generated": [{"id": rid, "admitted": True}]})
    for rid in rules:  # later uses of each rule alone
        for j in range(uses):
            eps.append({"episode_id": f"{rid}-{j}", "won": bool(rng.random() < (0.2 if bad[rid] else 0.7)),
                        "retrieval": served(rid)})
    train = pd.DataFrame(eps).assign(design="abstraction", model="m", env="e", seed_index=1)
    return lineage.stream_counts({"lineage": lin}, train)


def test_planted_association_is_recovered_and_a_null_is_not_rejected_too_often():
    """Through the whole definition (labels from downstream success, exposure from the parents'
    labels): bad parents breed bad rules -> the interval excludes 0 in most streams (power
    about 0.9 at this size); no inheritance -> rejected at about the nominal 5 %."""
    rng = np.random.default_rng(11)

    def rejects(p1, p0, **kw):
        c = simulate_stream(rng, p1, p0, **kw)
        return not rate_difference(c["flagged_exposed"], c["gen_exposed"], c["flagged_unexposed"],
                                   c["gen_unexposed"]).contains(0.0)

    assert sum(rejects(0.6, 0.15, n_syntheses=300, uses=8) for _ in range(20)) >= 14
    assert sum(rejects(0.3, 0.3) for _ in range(60)) <= 8


def test_association_statistic_null_rejection_and_coverage():
    rng = np.random.default_rng(5)
    reject, cover, sims = 0, 0, 1000
    for _ in range(sims):
        p1, p0 = 0.35, 0.35
        n1, n0 = 60, 140
        k1, k0 = rng.binomial(n1, p1), rng.binomial(n0, p0)
        d = rate_difference(int(k1), n1, int(k0), n0)
        reject += not d.contains(0.0)
        p1 = 0.5  # coverage under an effect of 0.15
        k1 = rng.binomial(n1, p1)
        cover += rate_difference(int(k1), n1, int(k0), n0).contains(0.15)
    assert reject / sims <= 0.07 and cover / sims >= 0.92
