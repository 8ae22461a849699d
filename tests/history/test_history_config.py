"""Bad history configuration and inputs fail early with a message naming the key and the fix."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import yaml

from hindsight.config import ConfigError, check_config, load_models
from hindsight.envs.tasks import select_tasks
from hindsight.studies.history.design import read_tasks, rollout_conditions
from hindsight.studies.history.workflow import HistoryWorkflow

from tests.conftest import REPO, base_config


def workflow(cfg):
    models = load_models(REPO / cfg["models_file"])
    return HistoryWorkflow(cfg, models, lambda m: {"identity": m})


def test_default_config_and_paper_preset_are_valid():
    cfg = base_config()
    check_config(cfg)
    hw = workflow(cfg)
    assert set(hw.envs) == {"alfworld", "scienceworld", "appworld"}
    assert len(hw.conditions) == 9 and "raw-chat" in hw.conditions
    preset = yaml.safe_load(open(REPO / "config/presets/history-paper.yaml"))
    merged = copy.deepcopy(cfg)
    for k, v in preset.items():
        merged[k] = v
    check_config(merged, "config/presets/history-paper.yaml")
    assert merged["history"]["tasks_per_cell"] == 500 and len(merged["history"]["models"]) == 5


@pytest.mark.parametrize("patch, message", [
    ({"conditions": ["raw", "shuffle"]}, "key history.conditions.1"),
    ({"actor": {"mode": "freestyle"}}, "key history.actor.mode"),
    ({"tasks_per_cell": 0}, "key history.tasks_per_cell"),
    ({"continuation": {"conditions": ["reference", "oracle"]}}, "key history.continuation.conditions.1"),
    ({"colour": "blue"}, "unknown key(s) 'colour'"),
])
def test_schema_rejects_bad_history_keys(patch, message):
    cfg = base_config()
    cfg["history"] = {**cfg["history"], **patch}
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        check_config(cfg)


def test_roles_needed_by_the_probe_and_the_calibrator():
    cfg = base_config()
    cfg["roles"] = {"calibrator": "smollm2"}
    with pytest.raises(ConfigError, match=r"history.probe.enabled needs roles.judge"):
        workflow(cfg)
    cfg["roles"] = {"judge": "smollm2"}
    with pytest.raises(ConfigError, match=r"lists 'calibrator', which needs roles.calibrator"):
        workflow(cfg)
    cfg["history"] = {**cfg["history"], "models": ["nobody"]}
    cfg["roles"] = {"judge": "smollm2", "calibrator": "smollm2"}
    with pytest.raises(ConfigError, match=r"endpoint 'nobody' is not in the registry"):
        workflow(cfg)
    with pytest.raises(ValueError, match="unknown history condition 'raw-html-chat'"):
        rollout_conditions({"conditions": ["raw"], "chat_conditions": ["raw-html"]})


def test_task_selection_is_balanced_seeded_and_strict(tmp_path):
    df = pd.DataFrame({"task_id": [f"{t}:{i}" for t in "abc" for i in range(4)], "split": "test",
                       "type": [t for t in "abc" for _ in range(4)]})
    picked = select_tasks(df, 3, "test", seed=1)
    assert sorted(t[0] for t in picked) == ["a", "b", "c"]          # one per type first
    assert select_tasks(df, 3, "test", seed=1) == picked             # seeded
    assert select_tasks(df, 5, "test", seed=1)[:3] == picked         # a larger n extends the same list
    with pytest.raises(ValueError, match=r"no tasks in split 'eval'; splits present: \['test'\]"):
        select_tasks(df, 1, "eval", seed=1)
    with pytest.raises(ValueError, match="13 tasks requested but split 'test' has only 12"):
        select_tasks(df, 13, "test", seed=1)
    df.drop(columns="type").to_parquet(tmp_path / "t.parquet")
    with pytest.raises(ValueError, match=r"t.parquet: missing column\(s\) \['type'\]"):
        read_tasks(tmp_path / "t.parquet", 1, "test", 0)


def test_workflow_helper_targets_follow_enabled():
    cfg = base_config()
    assert workflow(cfg).final_targets() == ["results/history/tables/index.md"]
    cfg["history"] = {**cfg["history"], "enabled": False}
    hw = workflow(cfg)
    assert not hw.enabled and hw.final_targets() == []
    cfg["history"] = {**cfg["history"], "enabled": True, "envs": []}
    assert workflow(cfg).final_targets() == []


def test_every_listed_env_needs_a_split():
    cfg = base_config()
    cfg["history"] = {**cfg["history"], "splits": {"alfworld": "eval"}}
    with pytest.raises(ConfigError, match=r"history.splits: no entry for environment 'scienceworld'"):
        workflow(cfg)
