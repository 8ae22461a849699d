"""Issue 12: no evaluation task's trajectory in any training file.  One small Snakemake run of
the calibrator's whole default design (every rule but SFT, Table 9's own cells off) on the
loopback endpoint and real ScienceWorld, with a task table whose training and evaluation
splits share task *types* (so only the split keeps them apart): the task ids of every
evaluation rollout (history's Raw and Causal cells, the Calibrator cell, both joint-actor
arms) appear in no training file (labels, both datasets, both joint-actor datasets) and in
none of the rollouts those are built from; the report ran the same check."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import yaml

from memtrials.studies.history.calibrator.leakage import leaks, task_pairs
from memtrials.testing import LoopbackServer, loopback_endpoint
from tests.conftest import REPO, run_snakemake, failure_text

TYPES = ("find-non-living-thing", "lifespan-longest-lived", "lifespan-shortest-lived")   # every default type
TASKS = [(f"{t}:{v}", split) for v, split in ((0, "test"), (1, "train")) for t in TYPES]


@pytest.mark.slow
def test_no_evaluation_task_reaches_a_training_file(workflow_copy):
    wf = workflow_copy
    (wf / "results" / "tasks").mkdir(parents=True)
    pd.DataFrame({"task_id": [t for t, _ in TASKS], "env": "scienceworld", "split": [s for _, s in TASKS],
                  "type": [t.split(":")[0] for t, _ in TASKS], "source": "official", "detail": "{}"}) \
        .to_parquet(wf / "results" / "tasks" / "scienceworld.parquet")
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    with LoopbackServer(policy="first_admissible") as srv:
        minilm = yaml.safe_load((REPO / "config/models.yaml").read_text())["endpoints"]["minilm"]
        (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": {"loop": loopback_endpoint(srv),
                                                                      "minilm": minilm}}))
        overlay = {
            "models_file": "models.yaml", "panel": ["loop"],
            **{study: {"enabled": False} for study in ("smoke", "luck", "playbook", "antipersist")},
            "roles": {r: "loop" for r in sorted(set(cfg["roles"]) | {"judge", "calibrator", "generator"})
                      if r != "embedder"},
            "history": {"envs": ["scienceworld"], "splits": {"scienceworld": "test"}, "tasks_per_cell": 1,
                        "in_flight": 1, "actor": {"mode": "choice", "max_actions": 2, "max_output_tokens": 32,
                                                  "max_listed_actions": 6}},
            "calibrator": {"splits": {"scienceworld": "train"},
                           "sources": {"envs": ["scienceworld"], "tasks_per_cell": 2},
                           "contexts": {"count": 2}, "rollouts": {"envs": ["scienceworld"], "trained": []},
                           "train": {"enabled": False},
                           "ablation": {"enabled": False}, "joint": {"max_output_tokens": 32}},
        }
        (wf / "overlay.yaml").write_text(yaml.safe_dump(overlay))
        out = run_snakemake(wf, "--configfile", "overlay.yaml", "--", "results/calibrator/tables/index.md")
        assert out.returncode == 0, failure_text(out)
    res = wf / "results"
    evaluation = [res / f"history/rollouts/loop/scienceworld/{c}.parquet" for c in ("raw", "causal")]
    evaluation += [res / "calibrator/rollouts/loop/scienceworld/calibrator.parquet"]
    evaluation += [res / f"calibrator/joint/rollouts/{a}/loop/scienceworld.parquet" for a in ("joint", "action_only")]
    sources = [res / "calibrator/sources/loop/scienceworld.parquet",          # labels and action-only data
               res / "calibrator/joint/sources/loop/scienceworld.parquet",    # joint-actor data
               res / "calibrator/contexts.parquet"]
    training = [res / "calibrator/labels.parquet"]
    training += [res / f"calibrator/dataset/{v}.{x}" for v in ("full", "screen_only") for x in ("jsonl", "parquet")]
    training += [res / f"calibrator/joint/{a}.jsonl" for a in ("joint", "action_only")]
    eval_tasks = set().union(*(task_pairs(p) for p in evaluation))
    assert eval_tasks and eval_tasks <= {("scienceworld", t) for t, s in TASKS if s == "test"}
    for p in sources:   # the training side was played, on the training tasks only
        assert task_pairs(p) and task_pairs(p) <= {("scienceworld", t) for t, s in TASKS if s == "train"}, p
    assert task_pairs(res / "calibrator/labels.parquet")
    assert leaks(evaluation, sources + training) == {}
    # the joint-actor data's lines name their source task (the check above could see a leak there)
    for a in ("joint", "action_only"):
        for line in (res / f"calibrator/joint/{a}.jsonl").read_text().splitlines():
            assert json.loads(line)["task_id"] in {t for t, s in TASKS if s == "train"}
    assert "training and evaluation tasks disjoint" in (res / "calibrator/tables/index.md").read_text()
