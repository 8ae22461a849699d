"""Tables 6-8 (per-endpoint qualifiers, L2b, Sus with intervals; the panel's ids and pins)
and Appendix C's example-selection rules as written."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import pandas as pd
import pyarrow as pa

from memtrials.studies.luck.analysis import analyse
from memtrials.studies.luck.design import DECISIONS, INSTRUCTIONS, OUTCOMES
from memtrials.studies.luck.examples import appendix_c, examples_markdown, select_examples
from memtrials.studies.luck.inference import REGISTERED_RULES
from memtrials.studies.luck.simulate import simulate_answers
from memtrials.studies.luck.tables import build_tables
from memtrials.studies.luck.worlds import generate_worlds, worlds_frame
from memtrials.studies.luck.writers import LESSON_SCHEMA, lesson_row

WORLDS = generate_worlds(31, 4, 16)
RULES = replace(REGISTERED_RULES, min_complete=40, panel_min_endpoints=1)


def _lessons(model: str, name_worse: float, rng) -> pd.DataFrame:
    rows = []
    for w in WORLDS:
        for i in INSTRUCTIONS:
            for d in DECISIONS:
                for o in OUTCOMES:
                    text = f"Switch to {w.worse_tool}." if rng.random() < name_worse else "Switch tools."
                    rows.append(lesson_row(model, w, i, d, o, text, "stop", "c", "p"))
    return pa.Table.from_pylist(rows, schema=LESSON_SCHEMA).to_pandas()


def _study():
    rng = np.random.default_rng(3)
    # big: the largest P2, remedies credited; small: luck-carrying, RBD as harmful as RB (not credited)
    parts = [simulate_answers(WORLDS, "big", rng, p2=0.6, discordance=0.0),
             simulate_answers(WORLDS, "small", rng, p2=0.4, discordance=0.0, lesson_arms=("RB", "RBD", "N")),
             simulate_answers(WORLDS, "none", rng, discordance=0.0)]
    answers = pd.concat(parts, ignore_index=True)
    for c in ("first_tool", "reason"):
        answers[c] = None
    lessons = pd.concat([_lessons("big", 0.9, rng), _lessons("small", 0.5, rng), _lessons("none", 0.0, rng)],
                        ignore_index=True)
    return answers, lessons, analyse(answers, worlds_frame(WORLDS), RULES, lessons)


def test_tables_7_and_8_give_qualifiers_l2b_and_sus_per_endpoint():
    answers, lessons, a = _study()
    t = build_tables(a.quantities, a.readings, a.remedies, a.cell_rates, a.lessons, a.missingness,
                     margin=RULES.margin)
    t7, t8 = t["table7_good"].set_index("endpoint"), t["table8_bad"].set_index("endpoint")
    assert list(t7.index) == ["big", "small", "none", "panel"]
    q = a.quantities.set_index(["unit", "quantity", "subset"])
    for col, name in (("A2 [95% CI]", "A2"), ("L2 [95% CI]", "L2"), ("L2b [95% CI]", "L2b")):
        r = q.loc[("big", name, "all")]
        assert t7.loc["big", col].startswith(f"{r.estimate:+.3f}") and "[" in t7.loc["big", col]
    assert t7.loc["big", "A2 rob. positive"] == "yes" and t7.loc["none", "A2 rob. positive"] == "no"
    assert t7.loc["big", "n (P2)"] == len(WORLDS)
    assert set(t8.columns) >= {"n (P3m)", "A3 [95% CI]", "L3 [95% CI]", "Sus [95% CI]", "Sus reading"}
    assert set(t8["Sus reading"]) == {"below 0.1"}
    assert "table6_endpoints" not in t  # needs the frozen slice's endpoint table


def test_appendix_c_rules_as_written():
    answers, lessons, a = _study()
    chosen = {c["rule"]: c for c in appendix_c(answers, lessons, worlds_frame(WORLDS), a.quantities,
                                                 a.readings, a.remedies, a.lessons)}
    carrying = set(a.readings.query("contrast == 'P2' and word == 'luck-carrying' and unit != 'panel'").unit)
    assert carrying == {"big", "small"}
    assert chosen["A"]["model"] == "big" and chosen["A"]["example"]["instruction"] == "RB"
    # B: the luck-carrying endpoint naming the worse tool least often, with a lesson that does not name it
    assert chosen["B"]["model"] == "small"
    ex = chosen["B"]["example"]
    assert ex is not None and ex["worse_tool"] not in ex["lesson"]
    # C: luck-carrying and neither remedy credited: "small" (its RBD and N lessons carry the effect too)
    assert chosen["C"]["model"] == "small" and chosen["C"]["example"]["instruction"] == "RBD"
    # each is the first world in id order meeting the base rule at that endpoint
    first = select_examples(answers[answers.model == "big"], lessons, worlds_frame(WORLDS), ("RB",))[0]
    assert chosen["A"]["example"]["world_id"] == first["world_id"]
    md = examples_markdown([], list(chosen.values()))
    assert "# Appendix C by its rules" in md and "**A** (largest P2" in md and "**C**" in md


def test_supplement_anomalies_regret_and_coverage():
    answers, lessons, a = _study()
    # no anomaly in a clean simulated run
    assert a.anomalies.empty
    lessons.loc[0, ["status", "lesson", "finish_reason"]] = ["refusal", None, "content_filter"]
    lessons.loc[1, "finish_reason"] = "length"
    answers.loc[3, ["status", "raw", "finish_reason", "error"]] = ["invalid", "I cannot decide.", "stop", "bad"]
    from memtrials.studies.luck.supplement import anomalies, regret

    an = anomalies(answers, lessons)
    assert list(an.status) == ["refusal", "ok (cut at max_tokens)", "invalid"]
    assert list(an.finish_reason) == ["content_filter", "length", "stop"] and an.raw.iloc[2] == "I cannot decide."
    # regret: each worse-tool answer gives up its world's gap; by hand for one cell
    wf = worlds_frame(WORLDS).set_index("world_id")
    gap = (wf.better_successes - wf.worse_successes) / wf.n_runs
    rg = regret(answers, worlds_frame(WORLDS)).set_index(["unit", "decision", "outcome", "arm"])
    cell = answers[(answers.model == "big") & (answers.decision == "good") & (answers.outcome == "failure")
                   & (answers.arm == "RB")]
    assert rg.loc[("big", "good", "failure", "RB"), "regret"] == pytest.approx(
        (cell.y * cell.world_id.map(gap)).mean())
    assert rg.loc[("panel", "good", "failure", "RB"), "regret"] == pytest.approx(
        rg.xs(("good", "failure", "RB"), level=[1, 2, 3]).drop("panel").regret.mean())
    t = build_tables(a.quantities, a.readings, a.remedies, a.cell_rates, a.lessons, a.missingness,
                     coverage=a.coverage, anomalies=an, regret=a.regret, margin=RULES.margin)
    assert len(t["table_anomalies"]) == 3 and t["table_coverage"].worlds.sum() == 2 * len(WORLDS)


def test_bootstrap_bounds_and_counts_tables():
    answers, lessons, a = _study()
    b = a.bootstrap.set_index(["unit", "quantity"])
    assert set(b.index.get_level_values(1)) == {"P2", "A2", "L2", "P3m", "A3", "L3", "Sus"}
    q = a.quantities.query("subset == 'all'").set_index(["unit", "quantity"])
    big = b.loc[("big", "P2")]
    assert big.boot_lo < q.loc[("big", "P2")].estimate < big.boot_hi
    # close to the registered t interval for a planted effect over 64 worlds
    assert big.boot_lo == pytest.approx(q.loc[("big", "P2")].lo, abs=0.05)
    assert b.loc[("none", "P2")].boot_lo == b.loc[("none", "P2")].boot_hi == 0.0  # a constant sample
    t = build_tables(a.quantities, a.readings, a.remedies, a.cell_rates, bootstrap=a.bootstrap, margin=0.1)
    assert len(t["table_bootstrap"]) == len(a.bootstrap)
    counts = t["table_counts"].set_index(["decision", "endpoint", "previous run"])
    r = a.cell_rates.query("unit == 'big' and decision == 'good' and outcome == 'failure' and arm == 'RB'").iloc[0]
    assert counts.loc[("good", "big", "failure"), "RB"] == f"{r.worse}/{r.counted}"
    bounds = t["table_bounds"]
    assert set(bounds.quantity) == {"P2", "A2", "L2", "P3m", "A3", "L3"}


def test_bootstrap_interval_covers_planted_and_null_means():
    """Coverage of the percentile bootstrap of a per-world mean, planted (0.10) and null,
    within 3 binomial SE of 95 %."""
    from memtrials.studies.luck.supplement import bootstrap_interval

    rng = np.random.default_rng(12)
    reps = 300
    for mean in (0.10, 0.0):
        hits = 0
        for _ in range(reps):
            # P2-like values on {-1, 0, 1}: +1 with prob 0.05 + mean, -1 with prob 0.05
            u = rng.random(256)
            v = np.where(u < 0.05 + mean, 1.0, np.where(u > 0.95, -1.0, 0.0))
            lo, hi = bootstrap_interval(v, 0.95)
            hits += lo <= mean <= hi
        assert hits / reps >= 0.95 - 3 * (0.95 * 0.05 / reps) ** 0.5, mean
