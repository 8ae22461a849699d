"""The one seeded stratified task sampler (memtrials.envs.tasks.select_tasks).

The pinned lists below were computed with the history study's own ``select_tasks``
(studies/history/design.py before it moved here): the history study's task lists, and
so its outputs, must not change.
"""

from __future__ import annotations

import pandas as pd
import pytest

from memtrials.envs.tasks import make_table, sample_tasks, select_tasks
from memtrials.studies.history.design import read_tasks

SIZES = {"boil": 5, "find-animal": 1, "grow-plant": 3, "melt": 4, "test-conductivity": 2}


def table() -> pd.DataFrame:
    rows = [{"task_id": f"{typ}-{split}-{i}", "split": split, "type": typ}
            for split, mult in (("train", 2), ("dev", 1), ("test", 1))
            for typ, k in SIZES.items() for i in range(k * mult)]
    return pd.DataFrame(rows)


PINNED = {
    (1, "test", 0): ["melt-test-1"],
    (4, "test", 0): ["melt-test-1", "boil-test-2", "grow-plant-test-0", "test-conductivity-test-1"],
    (7, "test", 20261130): ["test-conductivity-test-1", "melt-test-1", "boil-test-1", "grow-plant-test-0",
                            "find-animal-test-0", "test-conductivity-test-0", "melt-test-2"],
    (15, "test", 1): ["melt-test-2", "boil-test-0", "grow-plant-test-0", "test-conductivity-test-0",
                      "find-animal-test-0", "melt-test-3", "boil-test-1", "grow-plant-test-2",
                      "test-conductivity-test-1", "melt-test-0", "boil-test-4", "grow-plant-test-1",
                      "melt-test-1", "boil-test-2", "boil-test-3"],
    (9, "train", 0): ["melt-train-2", "boil-train-7", "grow-plant-train-4", "test-conductivity-train-2",
                      "find-animal-train-1", "melt-train-3", "boil-train-5", "grow-plant-train-3",
                      "test-conductivity-train-1"],
    (6, "dev", 3): ["test-conductivity-dev-0", "boil-dev-4", "melt-dev-1", "grow-plant-dev-0",
                    "find-animal-dev-0", "test-conductivity-dev-1"],
    (5, None, 0): ["melt-train-2", "boil-test-2", "grow-plant-dev-2", "find-animal-dev-0",
                   "test-conductivity-train-2"],
    (12, None, 42): ["grow-plant-test-2", "boil-train-1", "melt-dev-1", "test-conductivity-train-1",
                     "find-animal-dev-0", "grow-plant-train-0", "boil-dev-1", "melt-train-0",
                     "test-conductivity-train-0", "find-animal-train-1", "grow-plant-train-1", "boil-test-1"],
}


@pytest.mark.parametrize("n,split,seed", list(PINNED))
def test_history_selections_unchanged(n, split, seed):
    df = table()
    assert select_tasks(df, n, split, seed) == PINNED[(n, split, seed)]
    # row order and extra columns do not matter: a pure function of the table's content
    shuffled = df.sample(frac=1.0, random_state=7).assign(extra=1)
    assert select_tasks(shuffled, n, split, seed) == PINNED[(n, split, seed)]


def test_history_reads_it_from_the_table(tmp_path):
    path = tmp_path / "scienceworld.parquet"
    table().to_parquet(path)
    assert read_tasks(path, 4, "test", 0) == PINNED[(4, "test", 0)]
    with pytest.raises(ValueError, match=r"scienceworld.parquet: 16 tasks requested but split 'test' has "
                                         r"only 15; set history.tasks_per_cell"):
        read_tasks(path, 16, "test", 0)


def test_pooled_splits_and_errors():
    df = table()
    pooled = select_tasks(df, 8, ["dev", "test"], 0)
    assert len(set(pooled)) == 8 and {t.rsplit("-", 2)[1] for t in pooled} <= {"dev", "test"}
    assert {t.rsplit("-", 2)[0] for t in pooled[:5]} == set(SIZES)  # every type before a second of any
    with pytest.raises(ValueError, match=r"src.parquet: no tasks in split 'eval'; splits present: "
                                         r"\['dev', 'test', 'train'\]"):
        select_tasks(df, 1, "eval", 0, source="src.parquet")
    with pytest.raises(ValueError, match=r"t: 31 tasks requested but split \['dev', 'test'\] has only 30; "
                                         r"ask for at most 30"):
        select_tasks(df, 31, ["dev", "test"], 0, source="t")
    with pytest.raises(ValueError, match=r"missing column\(s\) \['type'\]"):
        select_tasks(df.drop(columns="type"), 1, "test", 0)


def test_envcheck_sample_is_per_split_use_of_it():
    df = make_table("scienceworld", [dict(r, source="official") for r in table().to_dict("records")])
    sample = sample_tasks(df, 3, seed=5)
    assert list(sample.columns) == list(df.columns)
    for split, part in sample.groupby("split", sort=False):
        assert part["task_id"].tolist() == select_tasks(df, 3, split, 5)
    assert sorted(sample["split"].unique()) == ["dev", "test", "train"]
    # a split smaller than per_split gives all its tasks
    small = df[(df["split"] != "dev") | (df["type"] == "melt")]
    part = sample_tasks(small, 10, seed=5, splits=["dev"])
    assert sorted(part["task_id"]) == [f"melt-dev-{i}" for i in range(4)]
