"""The study's estimators by simulation: a planted better design is ranked first with the
planted gap, a null gives equal means; sd over seeds, the equal-weighted average, calls,
per-round success and mode shares."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from memtrials.studies.antipersist import analysis


def episodes(rates, seeds=3, n=400, rng=None, phase="eval"):
    """Episodes of every (design, env) with success probability ``rates[design][env]``."""
    rng = rng or np.random.default_rng(0)
    rows = []
    for design, by_env in rates.items():
        for env, p in by_env.items():
            for s in range(1, seeds + 1):
                for i in range(n):
                    rows.append({"design": design, "model": "m", "env": env, "seed_index": s, "won": rng.random() < p,
                                 "round": 1 + i % 2 if phase == "train" else 2, "llm_calls": 3, "synthesis_calls_total": 1, "execution_calls": 2,
                                 "phase": phase})
    return pd.DataFrame(rows)


def test_planted_effect_is_recovered():
    ev = episodes({"antipersist": {"alfworld": 0.7, "scienceworld": 0.4},
                   "trajectory": {"alfworld": 0.5, "scienceworld": 0.3}})
    summary, average = analysis.success(ev)
    by = summary.set_index(["design", "setting"])
    assert by.loc[("antipersist", "m / alfworld"), "mean"] == pytest.approx(0.7, abs=0.04)
    assert by.loc[("trajectory", "m / scienceworld"), "mean"] == pytest.approx(0.3, abs=0.04)
    assert average["antipersist"] - average["trajectory"] == pytest.approx(0.15, abs=0.04)  # equal-weighted
    assert (summary["seeds"] == 3).all() and (summary["sd"] > 0).all() and (summary["sd"] < 0.05).all()


def test_null_gives_equal_means():
    ev = episodes({d: {"alfworld": 0.5} for d in ("a", "b", "c")}, n=2000, rng=np.random.default_rng(1))
    summary, average = analysis.success(ev)
    assert np.ptp(summary["mean"]) < 0.04 and np.ptp(average.values) < 0.04


def test_average_needs_every_setting_and_one_seed_has_no_sd():
    ev = episodes({"a": {"alfworld": 1.0, "scienceworld": 0.0}, "b": {"alfworld": 1.0}}, seeds=1, n=10)
    summary, average = analysis.success(ev)
    assert average["a"] == 0.5 and np.isnan(average["b"]) and summary["sd"].isna().all()


def test_calls_rounds_and_mode_shares():
    tr = episodes({"a": {"alfworld": 1.0}}, seeds=2, n=8, phase="train")
    tr["synthesis_mode"] = ["none", "imitation", "none", "corrective"] * 4
    c = analysis.calls(tr)
    assert c[["llm_calls", "synthesis_calls_total", "execution_calls"]].iloc[0].tolist() == [3, 1, 2]
    assert analysis.per_round(tr)["success"].tolist() == [1.0, 1.0]
    shares = analysis.mode_shares(tr).set_index(["round", "mode"])["share"]
    assert shares[(1, "none")] == 1.0 and shares[(2, "imitation")] == 0.5 and shares[(2, "corrective")] == 0.5
    assert analysis.mode_shares(tr.drop(columns=["synthesis_mode"])).empty


def test_parse_failures_are_counted_in_every_store():
    from memtrials.studies.antipersist.play import parse_failures

    state = {"rejected": [{"call_id": "a"}], "abstraction": {"rejected": [{"call_id": "b"}, {"call_id": "c"}]},
             "rules": [{"rejected": []}], "settings": {"k": 5}}
    assert parse_failures(state) == 3 and parse_failures({}) == 0
