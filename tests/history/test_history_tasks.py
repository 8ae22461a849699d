"""``history.tasks``: tasks named per environment (the cells play the first
``tasks_per_cell`` of them, in the list's order; null: the seeded draw from
``history.task_types``), and its check before the first job (unknown environment, a value
that is not a list of distinct ids, an id not in the split, fewer ids than tasks_per_cell)."""

from __future__ import annotations

import pytest

from memtrials.config import ConfigError, load_models
from memtrials.envs.tasks import make_table
from memtrials.studies.history.design import read_tasks
from memtrials.studies.history.preflight import check_named_tasks
from memtrials.studies.history.workflow import HistoryWorkflow

from tests.conftest import REPO, base_config


def table(tmp_path):
    rows = [{"task_id": f"find-non-living-thing:{i}", "split": "test" if i < 6 else "dev",
             "type": "find-non-living-thing", "source": "official"} for i in range(9)]
    (tmp_path / "tasks").mkdir(exist_ok=True)
    path = tmp_path / "tasks" / "scienceworld.parquet"
    make_table("scienceworld", rows).to_parquet(path, index=False)
    return path


def history(**over):
    return {**base_config()["history"], "envs": ["scienceworld"], "splits": {"scienceworld": "test"},
            "tasks_per_cell": 2, **over}


def test_named_tasks_are_played_in_their_order_and_null_keeps_the_seeded_draw(tmp_path):
    path = table(tmp_path)
    named = ["find-non-living-thing:5", "find-non-living-thing:1", "find-non-living-thing:3"]
    assert read_tasks(path, 2, "test", 7, "scienceworld", None, named) == named[:2]
    assert read_tasks(path, 3, "test", 7, "scienceworld", None, named) == named
    drawn = read_tasks(path, 2, "test", 7, "scienceworld", None, None)
    assert drawn == read_tasks(path, 2, "test", 7, "scienceworld")  # null: as before the key existed
    with pytest.raises(ValueError, match=r"history.tasks.scienceworld: unknown task\(s\) \['find-non-living-thing:7'\] "
                                         r"\(find-non-living-thing:7: in another split\); allowed: the 6 task ids of "
                                         r"split 'test' in .*scienceworld.parquet"):
        read_tasks(path, 1, "test", 7, "scienceworld", None, ["find-non-living-thing:7"])


@pytest.mark.parametrize("named, message", [
    (["find-non-living-thing:2", "boil:0"],
     r"history.tasks.scienceworld: unknown task\(s\) \['boil:0'\]; allowed: the 6 task ids of split 'test' in "
     r".*scienceworld.parquet \(e.g. find-non-living-thing:0, .*\); remove them, or set history.tasks.scienceworld: null"),
    (["find-non-living-thing:2", "find-non-living-thing:6"], r"\['find-non-living-thing:6'\] "
                                                             r"\(find-non-living-thing:6: in another split\)"),
    (["find-non-living-thing:2"], r"history.tasks_per_cell: 2 tasks per cell, but history.tasks.scienceworld names 1; "
                                  r"name at least 2 tasks there"),
    (["find-non-living-thing:2", "find-non-living-thing:2"], r"history.tasks.scienceworld: task\(s\) "
                                                             r"\['find-non-living-thing:2'\] listed more than once"),
    ("find-non-living-thing:2", r"history.tasks.scienceworld: 'find-non-living-thing:2' is not a non-empty list"),
    ([], r"history.tasks.scienceworld: \[\] is not a non-empty list"),
])
def test_a_bad_task_list_is_refused_before_the_first_job(tmp_path, named, message):
    table(tmp_path)
    with pytest.raises(ConfigError, match=message):
        check_named_tasks(history(tasks={"scienceworld": named}), base_config()["envs"], tmp_path / "tasks")


def test_the_check_without_a_table_and_for_unknown_environments(tmp_path):
    envs = base_config()["envs"]
    table(tmp_path)
    check_named_tasks(history(tasks={"scienceworld": ["find-non-living-thing:0", "find-non-living-thing:4"]}),
                      envs, tmp_path / "tasks")
    check_named_tasks(history(tasks={"scienceworld": None}), envs, tmp_path / "tasks")
    check_named_tasks(history(tasks=None), envs, tmp_path / "tasks")
    with pytest.raises(ConfigError, match=r"history.tasks: unknown environment\(s\) \['sciworld'\]; allowed: "):
        check_named_tasks(history(tasks={"sciworld": ["boil:0"]}), envs, tmp_path / "tasks")
    # before the table is built: ScienceWorld's own task names
    empty = tmp_path / "none"
    check_named_tasks(history(tasks={"scienceworld": ["lifespan-longest-lived:110", "boil:3"]}), envs, empty)
    with pytest.raises(ConfigError, match=r"history.tasks.scienceworld: unknown task\(s\) \['lifespan:110'\]; "
                                          r"allowed: <task name>:<variation>"):
        check_named_tasks(history(tasks={"scienceworld": ["lifespan:110", "boil:3"]}), envs, empty)


def test_the_workflow_refuses_a_bad_default_task_when_parsed_and_the_cell_carries_the_list():
    cfg = base_config()
    cfg["history"] = {**cfg["history"], "tasks": {**cfg["history"]["tasks"], "scienceworld": ["find-nonliving:1"]}}
    models = load_models(REPO / cfg["models_file"])
    with pytest.raises(ConfigError, match=r"config key history.tasks.scienceworld: unknown task\(s\) "
                                          r"\['find-nonliving:1'\]"):
        HistoryWorkflow(cfg, models, lambda m: {"identity": m})
    cfg["history"]["tasks"] = {"scienceworld": None, "alfworld": None, "appworld": None}
    hw = HistoryWorkflow(cfg, models, lambda m: {"identity": m})
    assert "tasks" not in hw.cell("smollm2", "alfworld")  # null: the cell is what it was before the key
