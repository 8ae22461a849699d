"""The leakage check the report runs (and the workflow test below relies on): a training file
holding an evaluation task is named, whatever its kind (Parquet table or chat JSONL); a
training file without task ids is refused rather than passed."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from memtrials.studies.history.calibrator.leakage import check_disjoint, leaks


def _jsonl(path, pairs):
    path.write_text("".join(json.dumps({"env": e, "task_id": t, "prompt": [], "target": "x"}) + "\n"
                            for e, t in pairs))
    return str(path)


def test_a_planted_evaluation_task_in_any_training_file_is_named(tmp_path):
    ev = tmp_path / "raw.parquet"
    pd.DataFrame({"env": ["sw", "sw", "alf"], "task_id": ["t:0", "t:1", "t:0"], "won": [1, 0, 1]}).to_parquet(ev)
    labels = tmp_path / "labels.parquet"
    pd.DataFrame({"env": ["sw", "alf"], "task_id": ["t:9", "t:1"]}).to_parquet(labels)   # alf t:1: not evaluated
    clean = _jsonl(tmp_path / "joint.jsonl", [("sw", "t:5"), ("alf", "t:1")])
    assert leaks([ev], [labels, clean]) == {}
    assert check_disjoint([str(ev)], [str(labels), clean]).startswith(
        "training and evaluation tasks disjoint: 3 training task(s) in 2 file(s), 3 evaluation task(s)")
    dirty = _jsonl(tmp_path / "action_only.jsonl", [("sw", "t:5"), ("sw", "t:1")])   # the same env and task
    assert leaks([ev], [labels, clean, dirty]) == {dirty: [("sw", "t:1")]}
    with pytest.raises(ValueError, match="action_only.jsonl.*'sw', 't:1'.*calibrator.splits"):
        check_disjoint([str(ev)], [str(labels), dirty])
    dirty_table = tmp_path / "full.parquet"
    pd.DataFrame({"env": ["alf"], "task_id": ["t:0"]}).to_parquet(dirty_table)
    assert list(leaks([ev], [dirty_table])) == [str(dirty_table)]


def test_a_training_file_without_task_ids_is_refused(tmp_path):
    ev = tmp_path / "raw.parquet"
    pd.DataFrame({"env": ["sw"], "task_id": ["t:0"]}).to_parquet(ev)
    old = tmp_path / "old.jsonl"
    old.write_text(json.dumps({"context_id": "c", "prompt": [], "target": "x"}) + "\n")
    with pytest.raises(ValueError, match="old.jsonl: line 1 has no env / task_id"):
        leaks([ev], [old])
    table = tmp_path / "old.parquet"
    pd.DataFrame({"context_id": ["c"]}).to_parquet(table)
    with pytest.raises(ValueError, match=r"old.parquet: no column\(s\) \['env', 'task_id'\]"):
        leaks([ev], [table])


def test_training_tasks_are_of_the_evaluation_types_and_never_an_evaluation_task(tmp_path):
    from memtrials.studies.history.calibrator.rollouts import training_tasks

    rows = [(f"{t}:{v}", split, t) for t in ("a", "b", "c") for v, split in ((0, "test"), (1, "train"), (2, "train"))]
    path = tmp_path / "tasks.parquet"
    pd.DataFrame(rows, columns=["task_id", "split", "type"]).to_parquet(path)
    cell = {"tasks_per_cell": 4, "split": "train", "seed": 3, "eval_split": "test", "eval_seed": 1,
            "eval_tasks_per_cell": 2, "task_types": ["a", "b"]}
    got = training_tasks(str(path), cell, "x")
    assert sorted(got) == ["a:1", "a:2", "b:1", "b:2"]
    with pytest.raises(ValueError, match="also history evaluation tasks; set calibrator.splits.x"):
        training_tasks(str(path), {**cell, "split": "test", "tasks_per_cell": 1}, "x")
