"""The independent re-implementation of the registered analysis (P2, P3m, A2, L2, A3, L3)
and its comparison (``REIMPL_COMPARISON.json``): agreement on simulated runs, planted
discrepancies named by quantity and unit, missing worlds and cells excluded as the paper
says, and the re-implementation's own statistics checked by hand."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from memtrials.io import write_parquet
from memtrials.studies.luck import entry
from memtrials.studies.luck import reimpl, reimpl_compare, reimpl_stats
from memtrials.studies.luck.analysis import TABLES, analyse
from memtrials.studies.luck.inference import Rules
from memtrials.studies.luck.freeze import CODE_FILES
from memtrials.studies.luck.readers import ANSWER_SCHEMA
from memtrials.studies.luck.simulate import simulate_answers
from memtrials.studies.luck.worlds import generate_worlds, worlds_frame
from tests.luck.test_luck_freeze import REPO, workflow
from tests.luck.test_luck_lock import registered_freeze, write_records

RULES = dict(level=0.95, alpha=0.05, robust_alpha=0.025, margin=0.10, bet=0.75, min_complete=8,
             panel_min_endpoints=2, ceiling=0.90)


def _answers(ws, model: str, seed: int, **scenario) -> pd.DataFrame:
    """Simulated answers with ``first_tool`` named as a reader would (Y from the tool)."""
    ans = simulate_answers(ws, model, np.random.default_rng(seed), **scenario)
    tools = {w.world_id: (w.better_tool, w.worse_tool) for w in ws}
    ans["first_tool"] = [None if math.isnan(y) else tools[w][int(y)] for w, y in zip(ans.world_id, ans.y)]
    for c in ANSWER_SCHEMA.names:
        if c not in ans.columns:
            ans[c] = None
    ans["sample"] = 0
    return ans[ANSWER_SCHEMA.names]


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """A registered freeze over 16 worlds and two endpoints' complete records, analysed."""
    tmp = tmp_path_factory.mktemp("reimpl")
    lw = workflow()
    sl = lw.slice()
    sl["panel"] = ["loop", "loop2"]
    sl["endpoints"]["loop2"] = sl["endpoints"]["loop"]
    worlds, prompts, reg, ws = registered_freeze(tmp, sl, per_domain=8)
    paths = []
    for k, model in enumerate(("loop", "loop2")):
        d = tmp / model
        write_records(d, model, ws, _answers(ws, model, k, p2=0.6, discordance=0.05), sl["endpoints"]["loop"]["sent"])
        paths.append(d)
    kw = dict(worlds=str(worlds), answers=[str(d / "answers.parquet") for d in paths],
              lessons=[str(d / "lessons.parquet") for d in paths], prompts_dir=str(prompts), config_slice=sl,
              registered=str(reg), rules=RULES, outdir=str(tmp / "analysis"))
    entry.analysis(**kw)
    return tmp, kw


def _inputs(kw):
    worlds = pd.read_parquet(kw["worlds"])
    answers = pd.concat([pd.read_parquet(p) for p in kw["answers"]], ignore_index=True)
    return worlds, answers


def _disagreeing(result):
    return {(e["table"], e["unit"], e["quantity"], e["field"]) for e in result["disagreeing"]}


def test_comparison_agrees_on_a_simulated_run_and_is_written(study):
    tmp, kw = study
    out = tmp / "analysis/REIMPL_COMPARISON.json"
    res = reimpl_compare.write_comparison(worlds=kw["worlds"], answers=kw["answers"], analysis_dir=kw["outdir"],
                                  rules=RULES, out=str(out))
    assert res["all_agree"], res["disagreeing"][:5]
    on_disk = json.loads(out.read_text())
    assert on_disk["all_agree"] and on_disk["records_locked"]
    tables = on_disk["by_table"]
    # 3 units x 6 quantities x 12 fields; 3 x 2 readings x 9; 3 x 32 cells x 5; 2 endpoints x 6 x 3
    assert tables["quantities"]["compared"] == 3 * 6 * 12
    assert tables["readings"]["compared"] == 3 * 2 * 9
    assert tables["cell_rates"]["compared"] == 3 * 32 * 5
    assert tables["world_values"]["compared"] == 2 * 6 * 3
    assert tables["records"] == {"compared": 2, "disagree": 0}
    words = {e["registered"] for e in on_disk["entries"] if e["table"] == "readings" and e["field"] == "word"}
    assert "descriptive only" not in words  # 16 complete worlds >= min_complete 8
    e = next(e for e in on_disk["entries"] if e["table"] == "quantities" and e["field"] == "estimate")
    assert set(e) >= {"registered", "reimplementation", "abs_diff", "tolerance", "agree"}
    assert e["tolerance"] == reimpl_compare.TOL_VALUE


def test_a_flipped_answer_only_in_the_reimplementation_is_named(study):
    tmp, kw = study
    worlds, answers = _inputs(kw)
    reg = reimpl_compare.registered_outputs(kw["outdir"], answers, worlds)
    i = answers.index[(answers.model == "loop") & (answers.decision == "good") & (answers.outcome == "failure")
                      & (answers.arm == "RB") & answers.y.notna()][0]
    w = worlds.set_index("world_id").loc[answers.world_id[i]]
    flipped = answers.copy()
    flipped.loc[i, "first_tool"] = w.better_tool if answers.y[i] == 1 else w.worse_tool
    res = reimpl_compare.compare(reg, reimpl.reimplement(flipped, worlds, RULES))
    assert not res["all_agree"]
    bad = _disagreeing(res)
    for q in ("P2", "A2", "L2"):
        assert ("quantities", "loop", q, "estimate") in bad
        assert ("world_values", "loop", q, "value") in bad
        assert ("quantities", "panel", q, "estimate") in bad
    assert ("cell_rates", "loop", "good/failure/RB", "worse") in bad
    # the bad decision's quantities and the other endpoint are untouched
    assert not {b for b in bad if b[2] in ("P3m", "A3", "L3") and b[0] == "quantities"}
    assert not {b for b in bad if b[1] == "loop2"}
    wv = next(e for e in res["disagreeing"] if e["table"] == "world_values" and e["quantity"] == "P2")
    assert wv["worlds_disagreeing"] == [{"world_id": answers.world_id[i], "registered": wv["worlds_disagreeing"][0]
                                         ["registered"], "reimplementation": wv["worlds_disagreeing"][0]
                                         ["reimplementation"]}]
    assert abs(wv["abs_diff"] - 1.0) < 1e-12


def test_a_perturbed_registered_estimate_and_word_are_named(study):
    tmp, kw = study
    worlds, answers = _inputs(kw)
    reg = reimpl_compare.registered_outputs(kw["outdir"], answers, worlds)
    new = reimpl.reimplement(answers, worlds, RULES)
    q = reg["quantities"].copy()
    q.loc[(q.unit == "loop2") & (q.quantity == "L3"), "estimate"] += 2e-9
    q.loc[(q.unit == "loop2") & (q.quantity == "A3"), "p_bet_pos"] += 5e-7  # within the p-value tolerance
    r = reg["readings"].copy()
    r.loc[(r.unit == "panel") & (r.contrast == "P3m"), "word"] = "luck-carrying"
    res = reimpl_compare.compare({**reg, "quantities": q, "readings": r}, new)
    assert _disagreeing(res) == {("quantities", "loop2", "L3", "estimate"), ("readings", "panel", "P3m", "word")}
    e = next(e for e in res["disagreeing"] if e["field"] == "estimate")
    assert 1e-9 < e["abs_diff"] < 3e-9 and e["tolerance"] == 1e-9


def test_missing_cells_and_worlds_are_excluded_as_registered(study, tmp_path):
    """A missing answer drops its world from the contrasts that use its cell (complete cases),
    a world with no answers at all is in the bounds only, and the panel keeps the worlds with
    at least ``panel_min_endpoints`` complete endpoints; both analyses agree."""
    tmp, kw = study
    worlds, answers = _inputs(kw)
    gone = worlds.world_id.iloc[0]
    a = answers[~((answers.model == "loop2") & (answers.world_id == gone))].copy()
    hole = (a.model == "loop") & (a.world_id == worlds.world_id.iloc[1]) & (a.decision == "good") \
        & (a.outcome == "success") & (a.arm == "NEUTRAL")
    a.loc[hole, ["status", "first_tool", "y"]] = ["invalid", None, np.nan]
    d = _registered_dir(a, worlds, RULES, tmp_path)
    res = reimpl_compare.compare(reimpl_compare.registered_outputs(d, a, worlds), reimpl.reimplement(a, worlds, RULES))
    assert res["all_agree"], res["disagreeing"][:5]
    new = reimpl.reimplement(a, worlds, RULES)
    q = new["quantities"].set_index(["unit", "quantity"])
    n = len(worlds)
    assert q.loc[("loop", "P2"), "n"] == n - 1 and q.loc[("loop", "A2"), "n"] == n  # A2 does not read the hole
    assert q.loc[("loop2", "P2"), "n"] == n - 1 and q.loc[("loop2", "P3m"), "n"] == n - 1
    assert q.loc[("panel", "P2"), "n"] == n - 2 and q.loc[("panel", "A2"), "n"] == n - 1
    cov = new["coverage"].set_index(["quantity", "complete_endpoints"]).worlds.to_dict()
    assert cov == {("P2", 1): 2, ("P2", 2): n - 2, ("P3m", 1): 1, ("P3m", 2): n - 1}
    wv = new["world_values"].set_index(["unit", "quantity", "world_id"])
    row = wv.loc[("loop2", "P2", gone)]
    assert math.isnan(row.value) and row.lower == -2.0 and row.upper == 2.0  # all four cells missing
    # the re-implementation's Y comes from first_tool; the records' y column is not read
    res2 = reimpl.reimplement(a.assign(y=0.0), worlds, RULES)["quantities"]
    assert np.allclose(res2.estimate.to_numpy(float), new["quantities"].estimate.to_numpy(float), equal_nan=True)


def test_a_primary_without_complete_world_stays_in_the_holm_family(study):
    """No complete P3m world: its p-values count as 1, P2's are doubled (family of two)."""
    tmp, kw = study
    worlds, answers = _inputs(kw)
    a = answers.copy()
    drop = (a.decision == "bad") & (a.arm == "NEUTRAL") & (a.outcome == "failure")
    a.loc[drop, ["status", "first_tool"]] = ["invalid", None]
    new = reimpl.reimplement(a, worlds, RULES)
    q = new["quantities"].set_index(["unit", "quantity"])
    rd = new["readings"].set_index(["unit", "contrast"])
    assert q.loc[("loop", "P3m"), "n"] == 0 and rd.loc[("loop", "P3m"), "word"] == "descriptive only"
    assert rd.loc[("loop", "P3m"), "p_t_holm"] == 1.0
    assert math.isclose(rd.loc[("loop", "P2"), "p_t_holm"], min(1.0, 2 * q.loc[("loop", "P2"), "p_t"]))
    assert math.isclose(rd.loc[("loop", "P2"), "p_bet_holm"], min(1.0, 2 * q.loc[("loop", "P2"), "p_bet_pos"]))


def test_statistics_by_hand():
    # Holm's step-down: sorted p times (m - rank), made monotone, capped at 1
    assert reimpl_stats.holm_adjusted([0.04, 0.01, 0.03]) == pytest.approx([0.06, 0.03, 0.06])
    assert reimpl_stats.holm_adjusted([0.3, float("nan")]) == [0.6, 1.0]
    # betting p-value: values on [-2, 2] rescaled, lambda = 0.75 / m'
    v = np.array([1.0, 0.0, 2.0, -1.0])
    y, m = (v + 2) / 4, 0.5
    k = np.prod(1 + 1.5 * (y - m))
    assert reimpl_stats.betting_p(v, (-2, 2), 0.0, True, 0.75) == pytest.approx(min(1, 1 / k), rel=1e-12)
    y2, m2 = (2 - v) / 4, (2 - 0.1) / 4
    k2 = np.prod(1 + 0.75 / m2 * (y2 - m2))
    assert reimpl_stats.betting_p(v, (-2, 2), 0.1, False, 0.75) == pytest.approx(min(1, 1 / k2), rel=1e-12)
    # the t interval and the degenerate rule on the support
    s = reimpl_stats.infer(v, (-2, 2), RULES)
    half = stats.t.ppf(0.975, 3) * v.std(ddof=1) / 2
    assert (s["lo"], s["hi"]) == pytest.approx((0.5 - half, 0.5 + half))
    assert s["p_t"] == pytest.approx(stats.ttest_1samp(v, 0).pvalue, rel=1e-9)
    z = reimpl_stats.infer(np.zeros(10), (-1, 1), RULES)
    q = 1 - 0.025 ** (1 / 10)
    assert z["degenerate"] and z["p_t"] == 1.0 and (z["lo"], z["hi"]) == pytest.approx((-q, q))


def _registered_dir(answers: pd.DataFrame, worlds: pd.DataFrame, rules: dict, d: Path) -> Path:
    """The registered analysis's tables and registered.json, as entry.analysis writes them."""
    a = analyse(answers, worlds, Rules.from_config(rules), None)
    for name in TABLES:
        write_parquet(getattr(a, name), d / f"{name}.parquet")
    (d / "registered.json").write_text(a.to_json())
    return d


def test_planted_effect_and_null_are_read_alike_over_128_worlds(tmp_path):
    """Simulation check: a planted P2 of 0.3 over 128 worlds (panel of two) is detected and
    luck-carrying by the re-implementation, with missing answers; a null is not detected;
    the registered analysis agrees on every number."""
    wl = generate_worlds(11, 4, 32, 0.10)
    wf = worlds_frame(wl)
    rules = dict(RULES, min_complete=100, panel_min_endpoints=1)
    ans = pd.concat([_answers(wl, "m1", 1, p2=0.3, discordance=0.02, missing=0.01),
                     _answers(wl, "m2", 3, p2=0.3, discordance=0.02)], ignore_index=True)
    planted = reimpl.reimplement(ans, wf, rules)
    rd = planted["readings"].set_index(["unit", "contrast"])
    assert rd.word[("m2", "P2")] == "luck-carrying" and rd.word[("panel", "P2")] == "luck-carrying"
    assert rd.bound_check[("m2", "P2")] == "passed" and not rd.detected[("m2", "P3m")]
    reg = reimpl_compare.registered_outputs(_registered_dir(ans, wf, rules, tmp_path / "planted"), ans, wf)
    res = reimpl_compare.compare(reg, planted)
    assert res["all_agree"], res["disagreeing"][:5]
    null_ans = _answers(wl, "m1", 2, discordance=0.02)
    null = reimpl.reimplement(null_ans, wf, rules)
    assert not null["readings"].detected.any()


def test_reimplementation_is_independent_and_frozen():
    """No computing function of the re-implementation (reimpl*.py) imports the registered
    analysis or the shared statistics; only reimpl_compare.registered_outputs reads the
    registered side.  Its modules are in the freeze (they determine a registered output)."""
    registered = ("memtrials.studies.luck.contrasts", "memtrials.studies.luck.inference",
                  "memtrials.studies.luck.analysis", "memtrials.stats")
    paths = sorted((REPO / "src/memtrials/studies/luck").glob("reimpl*.py"))
    assert [p.name for p in paths] == ["reimpl.py", "reimpl_compare.py", "reimpl_stats.py"]
    for path in paths:
        tree = ast.parse(path.read_text())
        for fn in [n for n in tree.body if isinstance(n, ast.FunctionDef)] + [tree]:
            nodes = ast.walk(fn) if fn is not tree else tree.body
            mods = {n.module for n in nodes if isinstance(n, ast.ImportFrom) and n.module}
            hit = {m for m in mods if m.startswith(registered)}
            allowed = path.name == "reimpl_compare.py" and fn is not tree and fn.name == "registered_outputs"
            assert not hit or allowed, (path.name, getattr(fn, "name", "module"), hit)
        assert f"src/memtrials/studies/luck/{path.name}" in CODE_FILES
