"""The scorecard (issue 39): each study's headline through the study interface, "not run" with
its reason where an arm is missing, and the run's cost from the call records.

Each study's headline function is fed small tables whose answer is known by hand (the
difference of two arms on the same tasks); the gatherer and the page writer run on them; the
plans come from the default config's studies, as the rule builds them.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from memtrials.config import check_config
from memtrials.llm.records import records_table, write_parquet_atomic
from memtrials.pipeline.scorecard import study_headlines, write
from memtrials.report.scorecard import Headline, record_cost
from memtrials.studies import study_class, study_names
from tests.conftest import base_config

MODEL = "smollm2"


def built(cfg):
    models = check_config(cfg)
    return {n: study_class(n)(cfg, models, lambda m: models[m].cell_params()) for n in study_names()}


@pytest.fixture(scope="module")
def studies():
    return built(base_config())


def test_every_study_declares_its_headline_and_the_default_config_runs_each(studies):
    for name, s in studies.items():
        plan = s.headline_plan(MODEL)
        assert s.headline_quantities and plan["quantities"] == list(s.headline_quantities), name
        assert plan["why"] is None and plan["function"] == f"{s.package}.headline:headline", (name, plan["why"])
        assert plan["inputs"] and all(plan["inputs"].values()), name
        assert s.record_files() and all(p.endswith(".calls.parquet") for p in s.record_files()), name
    quantities = [q for s in studies.values() for q in s.headline_quantities]
    for words in ("P2", "P3m", "Causal Transition minus Raw", "Calibrator minus Raw", "RBC minus Whole",
                  "RBC minus No playbook", "Anti-Persistence minus Trajectory"):
        assert any(q.startswith(words) for q in quantities), words


@pytest.mark.parametrize("change, study, words", [
    ({"antipersist": {"designs": ["trajectory", "abstraction"]}}, "antipersist", "lacks antipersist"),
    ({"history": {"conditions": ["raw", "experience"]}}, "history", "lacks causal"),
    ({"playbook": {"enabled": False}}, "playbook", "playbook.enabled is false"),
    ({"calibrator": {"rollouts": {"enabled": False}}}, "calibrator", "calibrator.rollouts.enabled is false"),
    ({"luck": {"panel": ["smollm2-calibrator"]}}, "luck", "not in the luck study's panel"),
])
def test_a_missing_arm_is_not_run_with_its_reason(change, study, words):
    from memtrials.config import merge

    s = built(merge(copy.deepcopy(base_config()), change))[study]
    plan = s.headline_plan(MODEL)
    assert words in plan["why"] and plan["inputs"] == {} and plan["function"] is None
    rows = study_headlines(MODEL, plan)
    assert [h.quantity for h in rows] == list(s.headline_quantities)
    assert all(h.status == "not run" and words in h.why and math.isnan(h.estimate) for h in rows)
    assert all(h.value() == "not run" for h in rows)  # never a 0


def test_headline_values_and_a_reason_is_required():
    h = Headline("s", "q", 5.0, -2.0, 12.0, unit="pp")
    assert h.value() == "+5.0 pp [-2.0, +12.0]"
    with pytest.raises(ValueError, match="needs its reason"):
        Headline.not_run("s", "q", "")


def _episodes(path: Path, won: dict[str, int], **cols) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"task_id": list(won), "won": [bool(v) for v in won.values()], **cols}).to_parquet(path)
    return str(path)


def _plan(studies, name: str, inputs: dict) -> dict:
    plan = studies[name].headline_plan(MODEL)
    return {**plan, "inputs": inputs}


def test_history_headline_is_causal_minus_raw_paired_by_task(studies, tmp_path):
    raw = {f"t{i}": int(i < 3) for i in range(10)}                 # 3 of 10
    causal = {f"t{i}": int(i < 6) for i in range(10)}              # 6 of 10, the same 3 and 3 more
    cols = {"model": MODEL, "env": "scienceworld"}
    inputs = {"raw": [_episodes(tmp_path / "raw.parquet", raw, **cols)],
              "causal": [_episodes(tmp_path / "causal.parquet", causal, **cols)]}
    (h,) = study_headlines(MODEL, _plan(studies, "history", inputs))
    assert h.status == "ok" and h.unit == "pp" and h.n == 10
    assert h.estimate == pytest.approx(30.0) and 0 <= h.lo < 30.0 < h.hi
    assert "discordant -/+ 0/3" in h.reading


def test_history_headline_with_no_shared_task_is_not_run(studies, tmp_path):
    cols = {"model": MODEL, "env": "scienceworld"}
    inputs = {"raw": [_episodes(tmp_path / "raw.parquet", {"a": 1}, **cols)],
              "causal": [_episodes(tmp_path / "causal.parquet", {"b": 1}, **cols)]}
    (h,) = study_headlines(MODEL, _plan(studies, "history", inputs))
    assert h.status == "not run" and "no task played in both arms" in h.why


def test_calibrator_headline_says_an_untrained_stand_in(studies, tmp_path):
    cols = {"model": MODEL, "env": "scienceworld"}
    tasks = [f"t{i}" for i in range(8)]
    inputs = {"raw": [_episodes(tmp_path / "raw.parquet", {t: 0 for t in tasks}, **cols)],
              "causal": [_episodes(tmp_path / "causal.parquet", {t: int(t in ("t0", "t1")) for t in tasks}, **cols)],
              "calibrator": [_episodes(tmp_path / "cal.parquet", {t: int(t < "t4") for t in tasks}, **cols)],
              "calibrator_calls": [], "manifests": []}
    plan = _plan(studies, "calibrator", inputs)
    plan["options"] = {**plan["options"], "trained_folders": {}}  # no checkpoint: an untrained stand-in
    over_raw, over_causal = study_headlines(MODEL, plan)
    assert over_raw.estimate == pytest.approx(50.0) and over_causal.estimate == pytest.approx(25.0)
    assert "untrained stand-in" in over_raw.reading and over_raw.n == 8


def test_antipersist_headline_pairs_by_benchmark_seed_and_task_on_the_final_round(studies, tmp_path):
    def ev(design: str, won_final: list[int]) -> str:
        rows = []
        for seed in (1, 2):
            for i, w in enumerate(won_final):
                rows.append(dict(design=design, model=MODEL, env="alfworld", seed_index=seed, round=2,
                                 task_id=f"t{i}", won=bool(w)))
                rows.append(dict(design=design, model=MODEL, env="alfworld", seed_index=seed, round=1,
                                 task_id=f"t{i}", won=True))  # an earlier round's snapshot: not the estimate
        p = tmp_path / f"{design}.parquet"
        pd.DataFrame(rows).to_parquet(p)
        return str(p)

    inputs = {"trajectory": [ev("trajectory", [0, 0, 1, 0])], "antipersist": [ev("antipersist", [1, 0, 1, 1])]}
    (h,) = study_headlines(MODEL, _plan(studies, "antipersist", inputs))
    assert h.estimate == pytest.approx(50.0) and h.n == 8 and "2 benchmark x seed" in h.n_label


def test_playbook_headline_is_rbc_minus_whole_and_minus_none(studies, tmp_path):
    base = tmp_path / "results/playbook/std" / MODEL / "alfworld" / "ace-passfail"
    (base / "eval").mkdir(parents=True)
    tasks = [f"t{i}" for i in range(5)]
    arms = {"none": [0, 0, 0, 0, 1], "whole:run1": [1, 0, 0, 0, 0], "whole:run2": [1, 1, 0, 0, 0],
            "curated:run1": [1, 1, 1, 0, 1], "curated:run2": [0, 0, 0, 0, 0]}
    evals = []
    for cand, won in arms.items():
        p = base / "eval" / f"{cand.replace(':', '-')}.parquet"
        pd.DataFrame({"candidate": cand, "task_id": tasks * 2, "won": [bool(w) for w in won] * 2, "seed": [0] * 5 + [1] * 5,
                      "env": "alfworld", "final_score": 0.0}).to_parquet(p)
        evals.append(str(p))
    choice = base / "choice.json"
    choice.write_text(json.dumps({"rbc": {"chosen": "curated:run1"}, "best_full": {"chosen": "whole:run2"},
                                  "runs": ["run1", "run2"], "cut_runs": ["run1", "run2"], "k": 2}))
    over_whole, over_none = study_headlines(MODEL, _plan(studies, "playbook", {"choice": [str(choice)], "eval": evals}))
    whole = np.mean([arms["whole:run1"], arms["whole:run2"]], axis=0) * 100
    rbc = np.array(arms["curated:run1"]) * 100
    assert over_whole.estimate == pytest.approx(float((rbc - whole).mean()))     # 80 - 30 = +50
    assert over_none.estimate == pytest.approx(60.0) and over_none.n == 5 and "1 setting" in over_none.n_label


def test_luck_headline_reads_the_registered_analysis(studies, tmp_path):
    q = pd.DataFrame([dict(unit=MODEL, quantity=p, subset="all", estimate=e, lo=e - 0.1, hi=e + 0.1, n=4)
                      for p, e in (("P2", 0.25), ("P3m", -0.05))]
                     + [dict(unit=MODEL, quantity="P2", subset="cue=explicit", estimate=9.0, lo=0, hi=0, n=2)])
    r = pd.DataFrame([dict(unit=MODEL, contrast="P2", label="luck-carrying"),
                      dict(unit=MODEL, contrast="P3m", label="unresolved")])
    q.to_parquet(tmp_path / "q.parquet")
    r.to_parquet(tmp_path / "r.parquet")
    (tmp_path / "registered.json").write_text(json.dumps({"rules": {"level": 0.95}}))
    inputs = {"quantities": [str(tmp_path / "q.parquet")], "readings": [str(tmp_path / "r.parquet")],
              "registered": [str(tmp_path / "registered.json")]}
    p2, p3 = study_headlines(MODEL, _plan(studies, "luck", inputs))
    assert (p2.estimate, p2.reading, p2.n) == (0.25, "luck-carrying", 4) and p2.value() == "+0.250 [+0.150, +0.350]"
    assert p3.estimate == -0.05 and p3.reading == "unresolved"
    other = study_headlines("someone-else", _plan(studies, "luck", inputs))
    assert all(h.status == "not run" and "no P" in h.why for h in other)


def _record(call_id: str, endpoint: str, pt: int, ct: int, cost: float, billed=None) -> dict:
    return {"call_id": call_id, "cell_id": "c", "origin_cell": "c", "endpoint": endpoint, "prompt_tokens": pt,
            "completion_tokens": ct, "cached_tokens": 0, "cost": cost, "billed_cost": billed}


def test_cost_counts_each_distinct_request_once_per_endpoint(tmp_path):
    a, b = tmp_path / "a.calls.parquet", tmp_path / "b.calls.parquet"
    write_parquet_atomic(records_table([_record("k1", "ep", 100, 10, 0.5, 0.4), _record("k2", "ep", 50, 5, 0.25),
                                        _record("k3", "other", 999, 9, 9.0)]), a)
    write_parquet_atomic(records_table([_record("k1", "ep", 100, 10, 0.5, 0.4)]), b)  # replayed in a second cell
    c = record_cost([a, b], "ep")
    assert (c.files, c.recorded_calls, c.distinct_calls) == (2, 3, 2)
    assert (c.prompt_tokens, c.completion_tokens, c.usd, c.billed_usd) == (150, 15, 0.75, 0.4)
    assert record_cost([a], "nobody").distinct_calls == 0 and record_cost([a], "nobody").billed_usd is None


def test_the_page_holds_every_study_and_the_cost(studies, tmp_path):
    calls = tmp_path / "x.calls.parquet"
    write_parquet_atomic(records_table([_record("k1", MODEL, 1200, 34, 0.0)]), calls)
    plans = [s.headline_plan("not-in-any-design") for s in studies.values()]
    rows = write(model="not-in-any-design", plans=plans, records=[str(calls)],
                 cache={"path": str(tmp_path / "none" / "llm.sqlite"), "backend": "sqlite"},
                 out_md=str(tmp_path / "s.md"), out_html=str(tmp_path / "s.html"))
    assert len(rows) == sum(len(s.headline_quantities) for s in studies.values())
    md, page = (tmp_path / "s.md").read_text(), (tmp_path / "s.html").read_text()
    for s in studies.values():
        for q in s.headline_quantities:
            assert q.replace("|", "\\|") in md and q in page.replace("&#x27;", "'")
    assert md.count("| not run |") == len(rows) and "no cache at" in md
    assert page.startswith("<!DOCTYPE html>") and page.count("<table") == 2
