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
    """Collects the records of one cell: journal on every call, Parquet at the end."""

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
            self._records[record["call_id"]] = dict(record)
            self._journal.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
            self._journal.flush()

    def restore(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Take back records of calls made before a resume (already journaled: not again)."""
        with self._lock:
            for record in records:
                self._records.setdefault(record["call_id"], dict(record))

    @property
    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._records.values())

    def write(self) -> None:
        """Write this cell's records as Parquet (if a path was given)."""
        if self.records_path is not None:
            write_parquet_atomic(records_table(self.records), self.records_path)

    def close(self) -> None:
        with self._lock:
            if not self._journal.closed:
                self._journal.close()
