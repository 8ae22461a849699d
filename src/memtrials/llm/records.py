"""The record of every model call: one stable Parquet schema, an append-only journal.

A cell's records file lists every call the cell made (fresh or replayed from the
cache), one row per call id, sorted by call id, so a rerun that replays the cache
writes byte-identical Parquet.  Alongside, an append-only JSONL journal
(``results/records/<cell>.jsonl``) receives each record the moment its call completes;
it is never truncated and is not a Snakemake output, so a killed or budget-stopped
cell keeps what it did.
"""

from __future__ import annotations

import json
import os
import threading
import zlib
from pathlib import Path
from typing import Any, Iterable, Mapping

import pyarrow as pa
import pyarrow.parquet as pq

RECORD_SCHEMA = pa.schema(
    [
        ("call_id", pa.string()),
        ("cell_id", pa.string()),
        ("origin_cell", pa.string()),
        ("endpoint", pa.string()),
        ("model", pa.string()),
        ("request_digest", pa.string()),
        ("sample", pa.int64()),
        ("purpose", pa.string()),
        ("messages", pa.string()),
        ("params", pa.string()),
        ("constraint", pa.string()),
        ("response_text", pa.string()),
        ("refusal", pa.string()),
        ("finish_reason", pa.string()),
        ("prompt_tokens", pa.int64()),
        ("completion_tokens", pa.int64()),
        ("cached_tokens", pa.int64()),
        ("cost", pa.float64()),
        ("latency_s", pa.float64()),
        ("attempts", pa.int64()),
        ("errors", pa.string()),
        ("seed", pa.int64()),
        ("system_fingerprint", pa.string()),
        ("started_at", pa.string()),
        ("finished_at", pa.string()),
        ("reported_model", pa.string()),
        ("reported_provider", pa.string()),
        ("billed_cost", pa.float64()),
        ("serving_mismatch", pa.string()),
    ]
)
"""Declared once; ``messages``, ``params`` and ``errors`` are canonical JSON strings.
``reported_model`` / ``reported_provider`` are what the reply said served the call,
``billed_cost`` the endpoint's own cost figure where it reports one (``cost`` is the
registry-price estimate), ``serving_mismatch`` where the reply disagrees with the registry
(:mod:`memtrials.llm.serving`; empty when it agrees, null in records made before these
columns existed)."""

FIELDS = tuple(RECORD_SCHEMA.names)

ROUTED_SCHEMA = RECORD_SCHEMA.append(pa.field("router", pa.string()))
"""A cell's records with one more, last column where any of its calls went through a router
that reported what answered (``router``: canonical JSON of its headers, null on the others;
:mod:`memtrials.llm.router`); every other cell's file keeps :data:`RECORD_SCHEMA`, byte for
byte as before the column existed."""


PACKED = ("messages", "params", "response_text")
"""The long text fields of a record, kept zlib-compressed while a cell runs (:class:`Recorder`)."""

CHUNK = 1024
"""Records a row group of a records file holds: a cell of more calls is written a chunk at a
time, so the records held and written never stand uncompressed in memory all at once."""


def _pack(record: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(record)
    for name in PACKED:
        if isinstance(out.get(name), str):
            out[name] = zlib.compress(out[name].encode("utf-8"), 1)
    return out


def _unpack(record: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(record)
    for name in PACKED:
        if isinstance(out.get(name), bytes):
            out[name] = zlib.decompress(out[name]).decode("utf-8")
    return out


def write_parquet_atomic(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Write to a temporary name in the same folder, then rename into place."""
    from memtrials.io import write_parquet

    write_parquet(table, path)


def records_table(records: Iterable[Mapping[str, Any]]) -> pa.Table:
    rows = sorted(records, key=lambda r: r["call_id"])
    schema = ROUTED_SCHEMA if any(r.get("router") for r in rows) else RECORD_SCHEMA
    columns = {name: [(r.get(name) or None) if name == "router" else r.get(name) for r in rows]
               for name in schema.names}
    return pa.table(columns, schema=schema)


def read_records(path: str | os.PathLike[str]) -> pa.Table:
    routed = "router" in pq.read_schema(path).names
    return pq.read_table(path, schema=ROUTED_SCHEMA if routed else RECORD_SCHEMA)


class Recorder:
    """Collects the records of one cell: journal on every call, Parquet at the end.  While the
    cell runs, each record's long texts (:data:`PACKED`) are kept zlib-compressed: a paper-scale
    cell's prompts (tens of KB each, most of them repeating the previous one) would otherwise
    hold hundreds of MB."""

    def __init__(self, cell_id: str, records_path: str | os.PathLike[str] | None, journal_dir: str | os.PathLike[str]):
        self.cell_id = cell_id
        self.records_path = Path(records_path) if records_path else None
        safe = cell_id.replace("/", "__").replace(" ", "_")
        self.journal_path = Path(journal_dir) / f"{safe}.jsonl"
        self.journal_path.parent.mkdir(parents=True, exist_ok=True)
        self._records: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        self._journal = open(self.journal_path, "a", encoding="utf-8")

    def add(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self._records[record["call_id"]] = _pack(record)
            self._journal.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
            self._journal.flush()

    def restore(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Take back records of calls made before a resume (already journaled: not again)."""
        with self._lock:
            for record in records:
                self._records.setdefault(record["call_id"], _pack(record))

    @property
    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            return [_unpack(r) for r in self._records.values()]

    def call_ids(self) -> set[str]:
        """The call ids recorded so far (without unpacking any record)."""
        with self._lock:
            return set(self._records)

    def records_except(self, ids: set[str]) -> list[dict[str, Any]]:
        """The records whose call id is not in ``ids`` (a stream batch's new calls)."""
        with self._lock:
            return [_unpack(r) for k, r in self._records.items() if k not in ids]

    def write(self) -> None:
        """Write this cell's records as Parquet (if a path was given), sorted by call id, a
        :data:`CHUNK` of records a row group (one row group, as ``write_parquet`` writes, up to
        a chunk), so memory stays flat in the number of calls."""
        if self.records_path is None:
            return
        with self._lock:
            ids = sorted(self._records)
            packed = dict(self._records)
        if len(ids) <= CHUNK:
            write_parquet_atomic(records_table(_unpack(packed[k]) for k in ids), self.records_path)
            return
        from memtrials.io import temporary_beside

        with temporary_beside(self.records_path, suffix=".parquet.tmp") as (_, tmp):
            with pq.ParquetWriter(tmp, RECORD_SCHEMA, compression="zstd") as writer:
                for i in range(0, len(ids), CHUNK):
                    writer.write_table(records_table(_unpack(packed[k]) for k in ids[i:i + CHUNK]))

    def close(self) -> None:
        with self._lock:
            if not self._journal.closed:
                self._journal.close()
