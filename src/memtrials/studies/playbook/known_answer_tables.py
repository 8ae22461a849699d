"""The playbook study's known-answer tables: the planted truth beside each estimate.

They read a planted setting's ordinary artifacts (growth playbooks, practice records, the
choice record, the evaluation episodes) and the declared world (:class:`.planted.Plant`); the
truth comes from :mod:`.planted_truth`, the estimates from the study's own records and
:func:`.analysis.methods` (the code behind Table 1), so a wiring defect between runs, cells
and tables shows as a truth outside its interval:

- ``ka_blocks``: every block of every practice round, its ridge estimate and with/without
  difference with interval, beside its Banzhaf value (the lesson codes it holds);
- ``ka_candidates``: every candidate's evaluation success (Wilson interval) beside ``p`` of the
  lessons the choice record says it serves;
- ``ka_methods``: Table 1's methods (No playbook, Whole, RBC-cut, Best-Full, RBC) beside the
  value of what they should serve, and RBC-cut minus Whole (paired over the same evaluation
  tasks and seeds) beside the planted margin;
- ``ka_curation``: per run, the curated set beside the set the study's rule picks on the true
  values and the best set within the cap (exact enumeration), with their values; ``kept_helpful``:
  the curated set holds every lesson of the best set, ``dropped_harmful``: no harmful lesson.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from scipy import stats as _st

from memtrials.stats import wilson_interval
from memtrials.studies.playbook import analysis
from memtrials.studies.playbook import planted_truth as truth
from memtrials.studies.playbook.planted import Plant, codes_in
from memtrials.studies.playbook.records import final_playbook, scores

Z95 = float(_st.norm.ppf(0.975))


def _codes(lessons: pd.DataFrame, ids: Sequence[str]) -> list[str]:
    text = dict(zip(lessons["lesson_id"].astype(str), lessons["text"].astype(str)))
    return [c for i in ids for c in codes_in(text[str(i)])]


def _covered(lo: float, hi: float, t: float) -> bool:
    return bool(np.isfinite(lo) and np.isfinite(hi) and lo - 1e-12 <= t <= hi + 1e-12)


def block_rows(plant: Plant, practice_record: Mapping[str, Any], playbooks_path: str) -> list[dict[str, Any]]:
    """One row per block of one practice round (``ka_blocks``)."""
    lessons = final_playbook(playbooks_path)
    blocks = [_codes(lessons, b["lesson_ids"]) for b in practice_record["block_lessons"]]
    true = truth.block_truth(plant, blocks, float(practice_record["p"])) if blocks else np.zeros(0)
    rows = []
    for est, codes, t in zip(practice_record["estimates"], blocks, true):
        lo, hi = est.get("lo"), est.get("hi")
        lo, hi = (np.nan if lo is None else float(lo)), (np.nan if hi is None else float(hi))
        rows.append({"run": f"run{practice_record['run']}", "block": int(est["block"]), "lessons": " ".join(codes),
                     "kinds": " ".join(plant.kind(c) for c in codes), "ridge": float(est["estimate"]),
                     "estimate": float(est["diff"]), "lo": lo, "hi": hi, "truth": float(t),
                     "covered": _covered(lo, hi, float(t))})
    return rows


def candidate_truth(plant: Plant, choice: Mapping[str, Any], playbooks: Sequence[str]) -> dict[str, tuple[float, list[str]]]:
    """Candidate name -> (p of the lessons it serves, their codes), from the choice record."""
    out = {}
    for c in choice["candidates"]:
        if c["run"] is None:
            out[c["name"]] = (plant.chance([]), [])
            continue
        lessons = final_playbook(playbooks[int(str(c["run"]).removeprefix("run")) - 1])
        codes = _codes(lessons, c["lesson_ids"])
        out[c["name"]] = (plant.chance(codes), codes)
    return out


def candidate_rows(plant: Plant, choice: Mapping[str, Any], playbooks: Sequence[str],
                   evals: Mapping[str, pd.DataFrame]) -> list[dict[str, Any]]:
    """One row per evaluated candidate (``ka_candidates``): ``evals`` maps a candidate name to its episodes."""
    true = candidate_truth(plant, choice, playbooks)
    rows = []
    for name, ep in evals.items():
        t, codes = true[name]
        y = scores(ep)
        i = wilson_interval(int(round(float(np.sum(y)))), len(y))
        rows.append({"candidate": name, "lessons": " ".join(codes), "n": len(y), "estimate": i.estimate,
                     "lo": i.lo, "hi": i.hi, "truth": t, "covered": _covered(i.lo, i.hi, t)})
    return rows


def _paired(a: pd.DataFrame, b: pd.DataFrame) -> tuple[float, float, float, int]:
    """Mean of a - b over the evaluation episodes both played (same task and seed index)."""
    key = ["task_id", "design_episode"]
    j = a.assign(y=scores(a))[key + ["y"]].merge(b.assign(y=scores(b))[key + ["y"]], on=key, suffixes=("_a", "_b"))
    d = (j["y_a"] - j["y_b"]).to_numpy(dtype=float)
    if len(d) < 2:
        return float("nan"), float("nan"), float("nan"), len(d)
    m, se = float(d.mean()), float(d.std(ddof=1) / np.sqrt(len(d)))
    return m, m - Z95 * se, m + Z95 * se, len(d)


def method_rows(plant: Plant, setting: tuple[str, str, str, str], choice: Mapping[str, Any],
                playbooks: Sequence[str], eval_paths: Sequence[str]) -> list[dict[str, Any]]:
    """Table 1's methods beside the truth of what each should serve (``ka_methods``)."""
    cands = analysis.candidate_scores(eval_paths)
    table = analysis.methods({setting: choice}, cands)
    true = candidate_truth(plant, choice, playbooks)
    cut = analysis.cut_runs(choice)
    should = {"Whole": [f"whole:{r}" for r in cut], "RBC-cut": [f"curated:{r}" for r in cut], "No playbook": ["none"],
              "Best-Full": [choice["best_full"]["chosen"]], "RBC": [choice["rbc"]["chosen"]]}
    by_name = {str(pd.read_parquet(p)["candidate"].iloc[0]): pd.read_parquet(p) for p in eval_paths}
    rows = []
    for r in table.itertuples(index=False):
        t = float(np.mean([true[n][0] for n in should[r.method]]))
        ys = [scores(by_name[n]) for n in should[r.method] if n in by_name]
        k, n = int(round(float(sum(np.sum(y) for y in ys)))), int(sum(len(y) for y in ys))
        i = wilson_interval(k, n)  # the episodes of what it served, pooled over its runs
        rows.append({"method": r.method, "serves": ", ".join(should[r.method]), "runs": r.runs,
                     "estimate": float(r.score) / 100.0, "truth": t, "lo": i.lo, "hi": i.hi,
                     "covered": _covered(i.lo, i.hi, t)})
    diffs = []
    for r in cut:
        if f"curated:{r}" in by_name and f"whole:{r}" in by_name:
            diffs.append(_paired(by_name[f"curated:{r}"], by_name[f"whole:{r}"]))
    if diffs:
        m = float(np.mean([d[0] for d in diffs]))
        half = float(np.sqrt(np.sum([((d[2] - d[1]) / 2) ** 2 for d in diffs]))) / len(diffs)
        t = float(np.mean([true[f"curated:{r}"][0] - true[f"whole:{r}"][0] for r in cut]))
        rows.append({"method": "RBC-cut - Whole", "serves": "paired over the evaluation episodes",
                     "runs": ",".join(cut), "estimate": m, "truth": t, "lo": m - half, "hi": m + half,
                     "covered": _covered(m - half, m + half, t)})
    return rows


def curation_rows(plant: Plant, practice_record: Mapping[str, Any], playbooks_path: str) -> dict[str, Any]:
    """The curated set of one run beside the rule on the true values and the best set in the cap."""
    lessons = final_playbook(playbooks_path)
    blocks = [_codes(lessons, b["lesson_ids"]) for b in practice_record["block_lessons"]]
    tokens = [int(b["tokens"]) for b in practice_record["block_lessons"]]
    cur = practice_record["curated"]
    budget, rule = cur["budget"], cur["rule"]
    greedy = truth.greedy_truth(plant, blocks, tokens, budget=budget, rule=rule, p=float(practice_record["p"]))
    best, best_value = truth.best_set(plant, blocks, tokens, budget)
    name = lambda bs: " ".join(sorted(c for b in bs for c in blocks[b])) or "(none)"  # noqa: E731
    kept = {c for b in cur["blocks"] for c in blocks[b]}
    held = {c for b in blocks for c in b}
    oracle = {c for b in best for c in blocks[b]}
    return {"run": f"run{practice_record['run']}", "curated": name(cur["blocks"]),
            "curated_value": truth.set_value(plant, blocks, truth.included(cur["blocks"], len(blocks))),
            "rule_on_truth": name(greedy.blocks),
            "rule_on_truth_value": truth.set_value(plant, blocks, truth.included(greedy.blocks, len(blocks))),
            "best_in_cap": name(best), "best_value": best_value,
            "whole_value": plant.chance(held),
            "kept_helpful": oracle <= kept,
            "dropped_harmful": not any(plant.effects[c] < 0 for c in kept)}


def read_json(path: str | Path) -> dict[str, Any]:
    return json.loads(Path(path).read_text(encoding="utf-8"))
