"""WebShop in the playbook study, through Snakemake on the loopback endpoint and the real
environment: an ACE growth run (the Reflector is told the purchase reward), its practice
round, the candidates' scoring, their evaluation and the report.  The shopper
(tests/webshop_shopper.py) searches for the instruction's words, opens the first product and
buys it, so scores are purchase rewards x 100, not success."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from memtrials.llm import read_records
from tests.webshop_shopper import run_on_webshop

BASE = "results/playbook/std/loop/webshop/ace-reward"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_playbook_on_webshop_scores_the_purchase_reward(tmp_path):
    wf = run_on_webshop(tmp_path, "playbook", {
        "envs": ["webshop"], "systems": ["ace"], "exclude": [], "tokenizer": "pieces",
        "actor": {"mode": "choice", "max_actions": 3, "max_output_tokens": 48, "max_listed_actions": None,
                  "listing": "sample"},
        "growth": {"runs": 1, "train_tasks": 2, "batch_size": 2},
        "measurement": {"blocks": 2, "practice_tasks": 2, "episodes": 4}, "choice": {"episodes": 2},
        "evaluation": {"tasks": 2, "seeds": 1}, "baselines": {"envs": []}, "diagnostics": {"enabled": False}},
        "results/playbook/tables/index.md", grammar=True)
    base = wf / BASE
    tasks = pd.read_parquet(wf / "results" / "tasks" / "webshop.parquet")
    split = dict(zip(tasks["task_id"].astype(str), tasks["split"].astype(str)))
    growth = pd.read_parquet(base / "growth/run1.parquet")
    practice = pd.read_parquet(base / "practice/run1.parquet")
    assert {split[t] for t in growth["task_id"]} == {"train"} and {split[t] for t in practice["task_id"]} == {
        "practice"}
    evals = pd.concat([pd.read_parquet(p) for p in sorted((base / "eval").glob("*.parquet"))
                       if not p.name.endswith((".steps.parquet", ".calls.parquet"))])
    assert {split[t] for t in evals["task_id"]} == {"test"}
    assert (evals["final_score"] > 0).any() and not (evals["final_score"] == evals["won"].astype(float)).all()
    # the candidates' scores are 100 x the mean purchase reward (one seed a task)
    cands = pd.read_csv(wf / "results/playbook/tables/candidates.csv")
    none = evals[evals["candidate"] == "none"]
    assert cands.loc[cands["candidate"] == "none", "score"].iloc[0] == pytest.approx(
        100 * none["final_score"].mean(), abs=0.05)
    # the practice round's scores (what the block estimates read) are the rewards too
    rec = json.loads((base / "practice/run1.json").read_text())
    assert rec["practice_score"] == pytest.approx(practice["final_score"].mean())
    # ACE's Reflector was told the reward of each growth episode
    calls = read_records(base / "growth/run1.calls.parquet").to_pandas()
    reflector = [json.loads(m)[-1]["content"] for m, p in zip(calls["messages"], calls["purpose"])
                 if p == "ace_reflector"]
    assert reflector and all("Reward: " in text and "(1.00 is full success)" in text for text in reflector)
    assert "WebShop scores the purchase reward x 100" in (wf / "results/playbook/tables/index.md").read_text()
