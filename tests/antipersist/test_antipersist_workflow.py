"""The study through Snakemake on the loopback endpoint and real ScienceWorld: training
streams -> frozen evaluations -> tables and figure (one tiny run)."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from memtrials.testing import LoopbackServer, loopback_embed_endpoint, loopback_endpoint
from tests.conftest import REPO, base_config, copy_workflow, run_snakemake

from .helpers import policy, task_table

DESIGNS = ["react", "autorefine"]  # a memoryless baseline and a memory design: every rule runs


@pytest.mark.slow
def test_antipersist_workflow_end_to_end(tmp_path):
    wf = copy_workflow(tmp_path / "wf")
    task_table(wf / "results" / "tasks" / "scienceworld.parquet")
    with LoopbackServer(policy=policy, embed_dim=32) as srv:
        (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": {
            "loop": loopback_endpoint(srv), "emb": loopback_embed_endpoint(srv)}}))
        overlay = {
            "models_file": "models.yaml", "panel": ["loop"],
            "roles": {**{r: "loop" for r in base_config()["roles"]}, "embedder": "emb"},
            "antipersist": {"envs": ["scienceworld"], "designs": DESIGNS, "rounds": 2, "round_size": 1,
                            "in_flight": 1, "pools": {"scienceworld": {"train_split": "train", "train_tasks": 2,
                                                                       "eval_split": "test", "eval_tasks": 1}},
                            "actor": {"mode": "choice", "max_actions": 2, "max_output_tokens": 16,
                                      "max_listed_actions": 5}},
        }
        (wf / "overlay.yaml").write_text(yaml.safe_dump(overlay))
        r = run_snakemake(wf, "--configfile", "overlay.yaml", "--", "results/antipersist/tables/index.md", timeout=900)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    out = wf / "results" / "antipersist"
    main = pd.read_csv(out / "tables" / "main.csv")
    assert list(main["design"]) == ["ReAct", "AutoRefine"] and "loop / scienceworld" in main.columns
    calls = pd.read_csv(out / "tables" / "calls.csv")
    assert (calls["train calls / episode"] >= calls["eval calls / episode"]).all()
    for d in DESIGNS:
        record = json.loads((out / "loop" / "scienceworld" / d / "seed1" / "eval.json").read_text())
        assert record["memory_unchanged"] and record["episodes"] == 1
        assert (out / "loop" / "scienceworld" / d / "seed1" / "train.spec.json").exists()
    assert (out / "figures" / "success_per_round.png").stat().st_size > 0
    assert (out / "figures" / "success_per_round.svg").exists()
    assert (out / "figures" / "heldout_per_round.png").stat().st_size > 0
    per_round = pd.read_csv(out / "tables" / "per_round.csv")
    assert {"training success", "held-out success"} <= set(per_round.columns)
    assert per_round.dropna(subset=["held-out success"])["round"].unique().tolist() == [2]  # the final round only
    assert (out / "tables" / "mode_shares_average.csv").exists()
    index = (out / "tables" / "index.md").read_text()
    assert "Held-out success" in index and "keep_discard.md" in index
