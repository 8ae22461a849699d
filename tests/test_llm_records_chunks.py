"""A cell's call records are held compressed and written a chunk at a time (issue 39, "Paper scale").

A paper-scale cell makes thousands of calls with prompts of tens of KB; the recorder keeps
each record's long texts zlib-compressed and writes the Parquet a chunk of records a row
group, so memory does not hold every prompt twice over.  What is written must not change: a
cell of up to one chunk gives the same bytes as one ``write_parquet`` of its records, a larger
one the same table.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq

from memtrials.llm import records as rec
from memtrials.llm.records import FIELDS, Recorder, records_table, write_parquet_atomic


def record(i: int) -> dict:
    r = {k: None for k in FIELDS}
    r.update(call_id=f"{i:024d}", cell_id="c", params="{}", response_text=f"reply {i} é",
             messages=json.dumps([{"role": "user", "content": "word " * 500 + str(i)}]), prompt_tokens=501)
    return r


def test_a_small_cell_writes_the_same_bytes_as_one_write(tmp_path):
    rows = [record(i) for i in (3, 1, 2)]
    r = Recorder("c", tmp_path / "a.parquet", tmp_path / "j")
    for x in rows:
        r.add(x)
    r.write()
    write_parquet_atomic(records_table(rows), tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    assert sorted(x["call_id"] for x in r.records) == sorted(x["call_id"] for x in rows)
    assert r.records_except({record(1)["call_id"]}) == [record(3), record(2)]
    assert r.call_ids() == {x["call_id"] for x in rows}
    r.close()


def test_a_large_cell_is_written_in_row_groups_of_a_chunk(tmp_path, monkeypatch):
    monkeypatch.setattr(rec, "CHUNK", 4)
    rows = [record(i) for i in range(10)]
    r = Recorder("c", tmp_path / "a.parquet", tmp_path / "j")
    for x in reversed(rows):
        r.add(x)
    r.write()
    r.close()
    assert pq.ParquetFile(tmp_path / "a.parquet").num_row_groups == 3
    assert pq.read_table(tmp_path / "a.parquet").equals(records_table(rows))
