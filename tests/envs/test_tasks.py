"""Task tables: schema, loading errors, seeded samples, disjointness checks (no engine needed)."""

from __future__ import annotations

import pandas as pd
import pytest

from memtrials.envs import load_tasks, make_env
from memtrials.envs.tasks import TASK_COLUMNS, check_disjoint, make_table, sample_tasks, write_table


def table():
    rows = [{"task_id": f"t{i}", "split": "train" if i < 6 else "eval", "type": f"k{i % 3}",
             "source": "generated", "scene": i} for i in range(10)]
    return make_table("alfworld", rows)


def test_table_has_stable_schema_and_detail():
    df = table()
    assert list(df.columns) == list(TASK_COLUMNS)
    assert df.loc[0, "detail"] == '{"scene": 0}'


def test_duplicate_ids_are_rejected():
    with pytest.raises(ValueError, match="'a' occurs twice"):
        make_table("appworld", [{"task_id": "a", "split": "x", "type": "t", "source": "s"}] * 2)


def test_load_tasks_errors_name_file_and_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="snakemake"):
        load_tasks("alfworld", tmp_path / "none.parquet")
    bad = tmp_path / "bad.parquet"
    pd.DataFrame({"task_id": ["a"]}).to_parquet(bad)
    with pytest.raises(ValueError, match=r"bad.parquet: missing column\(s\)"):
        load_tasks("alfworld", bad)
    with pytest.raises(ValueError, match="unknown environment 'webarena'"):
        load_tasks("webarena", bad)
    good = tmp_path / "good.parquet"
    write_table(table(), good)
    assert load_tasks("alfworld", good).equals(table())
    with pytest.raises(ValueError, match="expected only 'scienceworld'"):
        load_tasks("scienceworld", good)


def test_sample_is_seeded_and_spans_types():
    df = table()
    a, b = sample_tasks(df, 3, seed=0), sample_tasks(df, 3, seed=0)
    assert a.equals(b)
    assert set(a.loc[a["split"] == "train", "type"]) == {"k0", "k1", "k2"}
    assert not sample_tasks(df, 3, seed=1).equals(a) or len(df) <= 6


def test_disjointness_check():
    df = table()
    check_disjoint(df, ["scene"], ["train", "eval"])
    with pytest.raises(ValueError, match="occurs in both"):
        check_disjoint(df, ["type"], ["train", "eval"])


def test_make_env_rejects_unknown_name():
    with pytest.raises(ValueError, match="unknown environment 'webarena'"):
        make_env("webarena")
