"""The one atomic writer (memtrials.io): content, canonical JSON, Parquet schema, no
temporary left behind on success or failure, and no import from the rest of memtrials."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from memtrials import io as files


def test_text_bytes_json(tmp_path: Path) -> None:
    p = files.atomic_write_text(tmp_path / "a" / "b.txt", "héllo\n")
    assert p.read_bytes() == "héllo\n".encode()
    files.atomic_write_bytes(p, b"\x00\x01")
    assert p.read_bytes() == b"\x00\x01"
    j = files.atomic_write_json(tmp_path / "c.json", {"b": 1, "a": [1, "é"]})
    assert j.read_text(encoding="utf-8") == '{\n "a": [\n  1,\n  "é"\n ],\n "b": 1\n}\n'
    assert json.loads(j.read_text()) == {"a": [1, "é"], "b": 1}
    assert files.canonical_json({"b": 1, "a": 2}, indent=None) == '{"a":2,"b":1}\n'
    assert sorted(x.name for x in tmp_path.rglob("*")) == ["a", "b.txt", "c.json"]


CANONICAL_CASES = [
    {"b": 1, "a": [1, "é", {"z": None, "y": [True, 2.5]}]},
    ["ünïcode ✓ 漢字 \u2028", {"nested": {"deeper": {"k": "v", "a": [[], {}]}}}, -0.0, 1e100],
    {"messages": [{"role": "user", "content": "Héllo\n\t\"quoted\""}], "params": {"temperature": 0.0, "seed": 7}},
    "plain", 3, None,
]


@pytest.mark.parametrize("obj", CANONICAL_CASES)
def test_canonical_json_reproduces_each_callers_bytes(obj) -> None:
    # the model cache's key (memtrials.llm.cache.sqlite.canonical_json) can switch to this
    assert files.canonical_json(obj, indent=None, newline=False) == json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # the luck freeze's digests, with default=str for what JSON has no type for
    assert files.canonical_json([obj, Path("p")], indent=None, newline=False, default=str) == json.dumps(
        [obj, Path("p")], sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    # the actor's JSON columns and prompt digests (Python's spaced separators)
    assert files.canonical_json(obj, indent=None, compact=False, newline=False) == json.dumps(
        obj, sort_keys=True, ensure_ascii=False)
    # files and the compact digests with a newline, as before
    assert files.canonical_json(obj) == json.dumps(obj, sort_keys=True, ensure_ascii=False, indent=1) + "\n"
    assert files.canonical_json(obj, indent=None) == json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def test_canonical_json_without_default_raises() -> None:
    with pytest.raises(TypeError):
        files.canonical_json({"p": Path("p")}, indent=None, newline=False)


def test_parquet_schema_and_zstd(tmp_path: Path) -> None:
    schema = pa.schema([("x", pa.int64()), ("y", pa.string())])
    df = pd.DataFrame({"x": [1, 2], "y": ["a", None]})
    p = files.write_parquet(df, tmp_path / "t.parquet", schema)
    t = pq.read_table(p)
    assert t.schema.equals(schema)
    assert pq.ParquetFile(p).metadata.row_group(0).column(0).compression == "ZSTD"
    # a Table with a different but castable schema is cast; a wrong one raises
    files.write_parquet(pa.table({"x": pa.array([3], pa.int32()), "y": ["b"]}), p, schema)
    assert pq.read_table(p).schema.equals(schema) and pq.read_table(p)["x"].to_pylist() == [3]
    with pytest.raises((ValueError, pa.ArrowInvalid)):
        files.write_parquet(pa.table({"z": [1]}), p, schema)
    assert pq.read_table(p)["x"].to_pylist() == [3]  # the old file is untouched
    assert [x.name for x in tmp_path.iterdir()] == ["t.parquet"]


def test_failure_leaves_old_file_and_no_temporary(tmp_path: Path) -> None:
    p = files.atomic_write_text(tmp_path / "keep.txt", "old")

    class Boom:
        def savefig(self, *a, **k):
            Path(a[0]).write_text("partial")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        files.save_figure(Boom(), [tmp_path / "keep.txt"])
    assert p.read_text() == "old"
    assert [x.name for x in tmp_path.iterdir()] == ["keep.txt"]


def test_figure_is_deterministic(tmp_path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def draw(stem: str) -> list[Path]:
        fig, ax = plt.subplots()
        ax.plot([0, 1], [1, 0])
        out = files.save_figure(fig, [tmp_path / f"{stem}.png", tmp_path / f"{stem}.svg"])
        plt.close(fig)
        return out

    a, b = draw("a"), draw("b")
    assert [x.read_bytes() for x in a] == [x.read_bytes() for x in b]


def test_imports_nothing_from_memtrials() -> None:
    tree = ast.parse(Path(files.__file__).read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert not [n for n in names if n.split(".")[0] == "memtrials"]
