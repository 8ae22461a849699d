"""WebShop in the history study, through Snakemake on the loopback endpoint and the real
environment: rollouts in two conditions, the reference continuation (the environment
restored to step L/3 by replay) and the probe, with a kill -9 in the middle of the first
WebShop rollout cell; the rerun repeats no completed call.

The shopper (tests/webshop_shopper.py) searches for the instruction's words through the
search template, opens the first product and buys it: on goals 1 and 2 of the test split
that purchase scores a partial reward (0.714 and 0.667), so the episodes fail (success is
reward 1.0) and are continuation sources; the grammar path of a template is exercised
(the endpoint takes grammars).
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from memtrials.testing import Faults, LoopbackServer, loopback_endpoint
from tests.conftest import REPO, copy_workflow
from tests.history.test_history_workflow import default_roles, kill_then_rerun
from tests.webshop_shopper import shopper

TARGET = "results/history/tables/index.md"


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_history_on_webshop_resumes_after_kill_and_continues_by_replay(tmp_path):
    wf = copy_workflow(tmp_path / "wf")
    with LoopbackServer(policy=shopper, faults=Faults(latency_s=0.1)) as srv:
        minilm = yaml.safe_load((REPO / "config/models.yaml").read_text())["endpoints"]["minilm"]
        registry = {"loop": loopback_endpoint(srv, grammar=True), "minilm": minilm}
        (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": registry}))
        overlay = {
            "models_file": "models.yaml", "panel": ["loop"],
            "roles": {r: "loop" for r in default_roles() if r != "embedder"},
            "history": {
                "enabled": True, "envs": ["webshop"], "splits": {"webshop": "test"}, "seed": 1,
                "tasks": {"webshop": ["1", "2"]}, "tasks_per_cell": 2, "in_flight": 1,
                "conditions": ["raw", "causal"], "chat_conditions": [],
                "actor": {"mode": "choice", "max_actions": 5, "max_output_tokens": 48, "max_listed_actions": None},
                "continuation": {"enabled": True, "sources_per_cell": 2, "conditions": ["raw", "reference"],
                                 "chat_conditions": []},
                "probe": {"enabled": True}, "analysis": {"n_boot": 200}},
            "calibrator": {"enabled": False}, "antipersist": {"enabled": False}, "playbook": {"enabled": False},
            "luck": {"enabled": False}, "smoke": {"enabled": False}, "envs": {"run": ["webshop"]},
        }
        (wf / "overlay.yaml").write_text(yaml.safe_dump(overlay))
        served, done = kill_then_rerun(wf, srv, TARGET, wait_s=300)  # in the first WebShop rollout cell
    res = wf / "results" / "history"
    all_ids = set().union(*(set(pd.read_parquet(p)["call_id"]) for p in res.rglob("*.calls.parquet")))
    assert done <= all_ids and srv.stats.completions - served == len(all_ids - done)  # nothing repeated

    eps = {c: pd.read_parquet(res / f"rollouts/loop/webshop/{c}.parquet") for c in ("raw", "causal")}
    for e in eps.values():  # the same tasks and seeds in both conditions; a partial reward is no success
        assert list(e["task_id"]) == ["1", "2"] and list(e["seed"]) == list(eps["raw"]["seed"])
        assert not e["won"].any() and e["final_score"].round(3).tolist() == [0.714, 0.667]
        assert set(e["termination"]) == {"done"}
    steps = pd.read_parquet(res / "rollouts/loop/webshop/raw.steps.parquet")
    first = steps[steps["step"] == 1]
    assert first["action"].str.startswith("search[").all() and set(first["parse_status"]) == {"ok"}
    assert set(first["constraint"]) == {"grammar"}  # the template's grammar, the endpoint takes grammars
    assert json.loads(first["shown_actions"].iloc[0]) == ["search[<keywords>]"]

    cont = pd.read_parquet(res / "continuation/loop/webshop/reference.parquet")
    raw_cont = pd.read_parquet(res / "continuation/loop/webshop/raw.parquet")
    assert sorted(cont["task_id"]) == sorted(raw_cont["task_id"]) == ["1", "2"]  # both sources, paired
    cont_steps = pd.read_parquet(res / "continuation/loop/webshop/raw.steps.parquet")
    # restored to step L/3 = 1 (after the search): the continuation's first step is step 2, on a results page
    assert set(cont_steps.groupby("episode_id")["step"].min()) == {2}
    assert cont_steps.sort_values("step").groupby("episode_id")["obs_before"].first().str.contains(
        "Back to Search").all()
    probe = pd.read_parquet(res / "probe/loop/webshop.parquet")  # the shopper never repeats an action
    assert probe.empty
    index = (res / "tables" / "index.md").read_text()
    assert "table2_success" in index
    caption = (res / "tables" / "table2_success.md").read_text()
    assert "WebShop: success = a purchase with reward 1.0" in caption
