"""WebShop in the anti-persistence study, through Snakemake on the loopback endpoint and the
real environment: two training rounds, the frozen held-out evaluation and the report, for a
memoryless baseline and a memory design.  The shopper (tests/webshop_shopper.py) searches
for the instruction's words, opens the first product and buys it: success is the
environment's flag, a purchase with reward 1.0, so a partial reward counts as a failure."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from tests.webshop_shopper import run_on_webshop

DESIGNS = ["react", "autorefine"]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_antipersist_on_webshop_end_to_end(tmp_path):
    wf = run_on_webshop(tmp_path, "antipersist", {
        "envs": ["webshop"], "designs": DESIGNS, "rounds": 2, "round_size": 1, "in_flight": 1,
        "pools": {"webshop": {"train_split": "train", "train_tasks": 2, "eval_split": "test", "eval_tasks": 2}},
        "actor": {"mode": "choice", "max_actions": 4, "max_output_tokens": 48, "max_listed_actions": None}},
        "results/antipersist/tables/index.md")
    out = wf / "results" / "antipersist"
    tasks = pd.read_parquet(wf / "results" / "tasks" / "webshop.parquet")
    split = dict(zip(tasks["task_id"].astype(str), tasks["split"].astype(str)))
    for d in DESIGNS:
        base = out / "loop" / "webshop" / d / "seed1"
        ev, tr = pd.read_parquet(base / "eval.parquet"), pd.read_parquet(base / "train.parquet")
        assert {split[t] for t in ev["task_id"]} == {"test"} and {split[t] for t in tr["task_id"]} == {"train"}
        assert len(ev) == 2 and len(tr) == 2
        assert (ev["won"] == (ev["final_score"] == 1.0)).all()  # success is a reward-1.0 purchase
        assert (ev["final_score"] > 0).any()  # the shopper's purchases earn partial reward
        assert json.loads((base / "eval.json").read_text())["memory_unchanged"]
    main = pd.read_csv(out / "tables" / "main.csv")
    assert list(main["design"]) == ["ReAct", "AutoRefine"] and "loop / webshop" in main.columns
    assert "WebShop: success = a purchase with reward 1.0" in (out / "tables" / "main.md").read_text()
