"""``history.task_types``: the task-type filter applied before the seeded task draw, and its
check before the first job (unknown environment or type, too few tasks of the chosen types)."""

from __future__ import annotations

import pandas as pd
import pytest

from memtrials.config import ConfigError, load_models
from memtrials.envs.tasks import make_table, select_tasks
from memtrials.studies.history.design import filter_types, read_tasks
from memtrials.studies.history.preflight import check_history_envs, check_task_types
from memtrials.studies.history.workflow import HistoryWorkflow

from tests.conftest import REPO, base_config

TYPES = {"pick_and_place_simple": 3, "look_at_obj_in_light": 4, "pick_two_obj_and_place": 2}
SHORT, LONG, MIDDLE = TYPES


def tiny_table(tmp_path, env: str = "alfworld"):
    rows = [{"task_id": f"{typ}/{i}", "split": "eval" if i % 2 == 0 else "train", "type": typ, "source": "generated"}
            for typ, n in TYPES.items() for i in range(2 * n)]
    (tmp_path / "tasks").mkdir(exist_ok=True)
    path = tmp_path / "tasks" / f"{env}.parquet"
    make_table(env, rows).to_parquet(path, index=False)
    return path


def test_the_filter_keeps_only_the_listed_types_and_null_keeps_all(tmp_path):
    path = tiny_table(tmp_path)
    table = pd.read_parquet(path)
    assert filter_types(table, None, "t").equals(table)
    kept = filter_types(table, [SHORT, MIDDLE], "t")
    assert set(kept["type"]) == {SHORT, MIDDLE} and len(kept) == 2 * (3 + 2)
    got = read_tasks(path, 5, "eval", 7, "alfworld", [SHORT, MIDDLE])
    assert len(got) == 5 and {t.split("/")[0] for t in got} == {SHORT, MIDDLE}
    # the seed orders the kept tasks as select_tasks orders the filtered table
    assert got == select_tasks(kept, 5, "eval", 7)
    assert read_tasks(path, 9, "eval", 7, "alfworld") == select_tasks(table, 9, "eval", 7)
    # a type of the environment that this table lacks adds no task
    assert read_tasks(path, 3, "eval", 7, "alfworld", [SHORT, "pick_heat_then_place_in_recep"]) == \
        select_tasks(filter_types(table, [SHORT], "t"), 3, "eval", 7)
    # asking for more tasks than the chosen types hold names the key
    with pytest.raises(ValueError, match=r"list more types in history.task_types.alfworld"):
        read_tasks(path, 6, "eval", 7, "alfworld", [SHORT, MIDDLE])
    with pytest.raises(ValueError, match=r"task_types.alfworld: unknown task type\(s\) \['pick_heat_then_place_in_recep'\] "
                                         r"in .*alfworld.parquet; allowed: look_at_obj_in_light, pick_and_place_simple, "
                                         r"pick_two_obj_and_place"):
        read_tasks(path, 1, "eval", 7, "alfworld", ["pick_heat_then_place_in_recep"])


@pytest.mark.parametrize("types, message", [
    ([SHORT, "tall"], r"history.task_types.alfworld: unknown task type\(s\) \['tall'\] in ALFWorld's six task types; "
                      r"allowed: look_at_obj_in_light, .*; remove them or set history.task_types.alfworld: null"),
    (SHORT, r"history.task_types.alfworld: 'pick_and_place_simple' is not a non-empty list"),
    ([], r"history.task_types.alfworld: \[\] is not a non-empty list"),
])
def test_a_bad_type_list_is_refused_with_the_key_the_allowed_types_and_the_fix(tmp_path, types, message):
    tiny_table(tmp_path)
    h = {**base_config()["history"], "envs": ["alfworld"], "tasks_per_cell": 1, "task_types": {"alfworld": types}}
    with pytest.raises(ConfigError, match=message):
        check_task_types(h, base_config()["envs"], tmp_path / "tasks")


def test_the_check_before_the_first_job(tmp_path):
    envs = base_config()["envs"]
    tiny_table(tmp_path)
    base = {**base_config()["history"], "envs": ["alfworld"], "tasks_per_cell": 5}
    check_task_types({**base, "task_types": {"alfworld": None}}, envs, tmp_path / "tasks")
    check_task_types({**base, "task_types": None}, envs, tmp_path / "tasks")
    check_task_types({**base, "task_types": {"alfworld": [SHORT, MIDDLE]}}, envs, tmp_path / "tasks")
    # generated games are counted from envs.alfworld.sizes (the generator's per-type quotas), so
    # the 5-game table above does not decide: 12 eval games make 2 of each of the six types
    small = {**envs, "alfworld": {**envs["alfworld"], "sizes": {"train": 6, "practice": 6, "eval": 12}}}
    check_history_envs({**base, "tasks_per_cell": 4, "task_types": {"alfworld": [SHORT, MIDDLE]}},
                       small, tmp_path / "tasks")
    with pytest.raises(ConfigError, match=r"tasks_per_cell: 6 tasks per cell, but the alfworld split 'eval' "
                                          r"holds 4 tasks of the types in history.task_types.alfworld \(the "
                                          r"generated games, envs.alfworld.sizes\)"):
        check_history_envs({**base, "tasks_per_cell": 6, "task_types": {"alfworld": [SHORT, MIDDLE]}},
                           small, tmp_path / "tasks")
    with pytest.raises(ConfigError, match=r"history.task_types: unknown environment\(s\) \['sciworld'\]"):
        check_task_types({**base, "task_types": {"sciworld": ["boil"]}}, envs, tmp_path / "tasks")
    # before any task table exists, the environments' own type lists
    empty = tmp_path / "none"
    check_task_types({**base, "envs": ["scienceworld", "alfworld"],
                      "task_types": {"scienceworld": ["lifespan-longest-lived"], "alfworld": ["look_at_obj_in_light"]}},
                     envs, empty)
    with pytest.raises(ConfigError, match=r"task_types.scienceworld: unknown task type\(s\) \['lifespan'\] "
                                          r"in ScienceWorld's task list.*allowed: boil, "):
        check_task_types({**base, "envs": ["scienceworld"], "task_types": {"scienceworld": ["lifespan"]}}, envs, empty)
    with pytest.raises(ConfigError, match=r"alfworld: unknown task type\(s\) \['pick_and_place'\] in ALFWorld's"):
        check_task_types({**base, "task_types": {"alfworld": ["pick_and_place"]}}, envs, empty)


def test_the_workflow_refuses_an_unknown_default_type_when_parsed():
    cfg = base_config()
    cfg["history"] = {**cfg["history"], "task_types": {**(cfg["history"]["task_types"] or {}),
                                                       "scienceworld": ["find-nonliving-thing"]}}
    models = load_models(REPO / cfg["models_file"])
    with pytest.raises(ConfigError, match=r"config key history.task_types.scienceworld: unknown task type\(s\) "
                                          r"\['find-nonliving-thing'\].*allowed: .*find-non-living-thing"):
        HistoryWorkflow(cfg, models, lambda m: {"identity": m})
    # the cell carries its environment's types (its output depends on them)
    cfg["history"]["task_types"] = {"scienceworld": ["find-non-living-thing"]}
    hw = HistoryWorkflow(cfg, models, lambda m: {"identity": m})
    assert hw.cell("smollm2", "scienceworld")["task_types"] == ["find-non-living-thing"]
    assert hw.cell("smollm2", "alfworld")["task_types"] is None
