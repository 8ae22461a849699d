"""Bad history configuration and inputs fail early with a message naming the key and the fix."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import yaml

from memtrials.config import ConfigError, check_config, load_models
from memtrials.envs.tasks import select_tasks
from memtrials.studies.history.design import read_tasks, rollout_conditions
from memtrials.studies.history.workflow import HistoryWorkflow

from tests.conftest import REPO, base_config


def workflow(cfg):
    models = load_models(REPO / cfg["models_file"])
    return HistoryWorkflow(cfg, models, lambda m: {"identity": m})


def test_default_config_and_paper_preset_are_valid():
    cfg = base_config()
    check_config(cfg)
    hw = workflow(cfg)
    assert set(hw.envs) == {"alfworld", "scienceworld"}  # the default leaves AppWorld out, for time
    assert len(hw.conditions) == 8 and not any(c.endswith("-chat") for c in hw.conditions)  # chat: the preset
    from memtrials.config.load import merge

    preset = yaml.safe_load(open(REPO / "config/presets/history-paper.yaml"))
    merged = merge(copy.deepcopy(cfg), preset)  # key by key, as Snakemake merges overlays
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
    with pytest.raises(ConfigError, match=r"^config key history\.models \(or panel\): endpoint 'nobody' is not in the registry \("):
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


def test_shuffle_is_a_declared_option_passed_to_the_rollout_cells():
    cfg = base_config()
    assert cfg["history"]["shuffle"] == "per_step"  # the default (docs/history.md says why)
    assert workflow(cfg).cell("smollm2", "alfworld")["shuffle"] == "per_step"
    cfg["history"] = {**cfg["history"], "shuffle": "per_episode"}
    check_config(cfg)
    assert workflow(cfg).cell("smollm2", "alfworld")["shuffle"] == "per_episode"
    cfg["history"] = {**cfg["history"], "shuffle": "sometimes"}
    with pytest.raises(ConfigError, match="key history.shuffle"):
        check_config(cfg)


def paper_preset():
    merged = copy.deepcopy(base_config())
    merged.update(yaml.safe_load(open(REPO / "config/presets/history-paper.yaml")))
    return merged


def test_paper_preset_on_the_generated_data_stops_before_any_job_naming_split_size_and_fix():
    with pytest.raises(ConfigError) as err:
        workflow(paper_preset())
    msg = str(err.value)
    assert "history.tasks_per_cell: 500 tasks per cell" in msg and "alfworld split 'eval' holds 134 tasks" in msg
    assert "ALFWORLD_DATA" in msg and "envs.alfworld.source: official" in msg
    cfg = paper_preset()
    cfg["history"] = {**cfg["history"], "envs": ["appworld"]}
    with pytest.raises(ConfigError, match=r"appworld split 'eval' holds 168 tasks .*APPWORLD_ROOT"):
        workflow(cfg)
    cfg["history"] = {**cfg["history"], "tasks_per_cell": 10}
    cfg["roles"] = {**cfg["roles"]}
    assert workflow(cfg).envs == ["appworld"]  # a request the data holds passes


def test_split_sizes_come_from_a_built_task_table(tmp_path, official_env_vars):
    from memtrials.envs.tasks import make_table
    from memtrials.studies.history.preflight import check_history_envs

    rows = [{"task_id": f"t{i}", "split": "test", "type": "x", "source": "official"} for i in range(4)]
    make_table("scienceworld", rows).to_parquet(tmp_path / "scienceworld.parquet")
    h = {**base_config()["history"], "envs": ["scienceworld"], "tasks_per_cell": 5, "task_types": None}
    with pytest.raises(ConfigError, match=r"scienceworld split 'test' holds 4 tasks .*scienceworld.parquet"):
        check_history_envs(h, base_config()["envs"], tmp_path)
    check_history_envs({**h, "tasks_per_cell": 4}, base_config()["envs"], tmp_path)
    # a table built from the other source (an earlier config's; the workflow rebuilds it) counts nothing
    envs = base_config()["envs"]
    make_table("alfworld", [{**r, "source": "generated", "split": "eval"} for r in rows]).to_parquet(
        tmp_path / "alfworld.parquet")
    official = {**envs, "alfworld": {**envs["alfworld"], "source": "official"}}
    check_history_envs({**h, "envs": ["alfworld"], "splits": {"alfworld": "eval_out_of_distribution"}},
                       official, tmp_path)
    # generated games are counted from envs.alfworld.sizes, per type, built table or not: this
    # 4-game table is one an earlier config's sizes left, and the workflow rebuilds it
    check_history_envs({**h, "envs": ["alfworld"], "splits": {"alfworld": "eval"}}, envs, tmp_path)
    eval_size = envs["alfworld"]["sizes"]["eval"]
    with pytest.raises(ConfigError, match=rf"alfworld split 'eval' holds {eval_size} tasks \(the generated games, "
                                          r"envs\.alfworld\.sizes\)"):
        check_history_envs({**h, "envs": ["alfworld"], "splits": {"alfworld": "eval"}, "tasks_per_cell": eval_size + 1},
                           envs, tmp_path)
    with pytest.raises(ConfigError, match=r"alfworld split 'eval' holds 22 tasks of the types in "
                                          r"history\.task_types\.alfworld \(the generated games"):
        check_history_envs({**h, "envs": ["alfworld"], "splits": {"alfworld": "eval"}, "tasks_per_cell": 23,
                            "task_types": {"alfworld": ["look_at_obj_in_light"]}}, envs, tmp_path)
    # with a type filter the count is of those types only: the default's types are not in this table
    with pytest.raises(ConfigError, match=r"split 'test' holds 0 tasks of the types in history.task_types"
                                          r".scienceworld .*; list more types in history.task_types"):
        check_history_envs({**h, "tasks_per_cell": 1, "task_types": base_config()["history"]["task_types"]},
                           base_config()["envs"], tmp_path)


@pytest.mark.parametrize("patch, message", [
    ({"splits": {"alfworld": "evl", "scienceworld": "test", "appworld": "eval"}},
     r"history.splits.alfworld: unknown split 'evl' for the generated alfworld data; allowed: train, practice, eval"),
    ({"splits": {"alfworld": "eval", "scienceworld": "testing", "appworld": "eval"}},
     r"history.splits.scienceworld: unknown split 'testing' .*allowed: train, dev, test"),
    ({"splits": {"alfworld": "eval", "scienceworld": "test", "appworld": "eval", "webarena": "test"}},
     r"history.splits: unknown environment\(s\) \['webarena'\]; allowed: alfworld, scienceworld, appworld, webshop"),
    ({"env_options": {"alfworld": {"max_step": 5}}},
     r"history.env_options.alfworld: unknown option\(s\) \['max_step'\]; allowed: root, official, max_steps, process"),
    ({"env_options": {"sciworld": {}}}, r"history.env_options: unknown environment\(s\) \['sciworld'\]"),
])
def test_unknown_splits_and_env_options_fail_before_the_first_job(patch, message):
    cfg = base_config()
    cfg["history"] = {**cfg["history"], **patch}
    check_config(cfg)  # the schema cannot know them: the workflow's check does
    with pytest.raises(ConfigError, match=message):
        workflow(cfg)


def test_official_split_names_follow_the_configured_source(official_env_vars):
    cfg = base_config()
    cfg["envs"] = {**cfg["envs"], "alfworld": {**cfg["envs"]["alfworld"], "source": "official"}}
    cfg["history"] = {**cfg["history"], "splits": {**cfg["history"]["splits"], "alfworld": "eval_out_of_distribution"}}
    assert "alfworld" in workflow(cfg).envs  # size unknown until the official table is built: the cell checks it
    cfg["history"]["splits"]["alfworld"] = "eval"
    with pytest.raises(ConfigError, match="allowed: train, eval_in_distribution, eval_out_of_distribution"):
        workflow(cfg)
