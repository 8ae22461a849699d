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

from memtrials.io import SpillFile, write_parquet_groups

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


CHUNK = 1024
"""Records a row group of a records file holds: a cell of more calls is written a chunk at a
time, so the records written never stand uncompressed in memory all at once."""


def write_parquet_atomic(table: pa.Table, path: str | os.PathLike[str]) -> None:
    """Write to a temporary name in the same folder, then rename into place."""
    from memtrials.io import write_parquet

    write_parquet(table, path)


def records_table(records: Iterable[Mapping[str, Any]], schema: pa.Schema | None = None) -> pa.Table:
    """Records sorted by call id as a table of ``schema`` (by default :data:`ROUTED_SCHEMA` where
    any record has a ``router`` value, else :data:`RECORD_SCHEMA`)."""
    rows = sorted(records, key=lambda r: r["call_id"])
    if schema is None:
        schema = ROUTED_SCHEMA if any(r.get("router") for r in rows) else RECORD_SCHEMA
    columns = {name: [(r.get(name) or None) if name == "router" else r.get(name) for r in rows]
               for name in schema.names}
    return pa.table(columns, schema=schema)


def read_records(path: str | os.PathLike[str]) -> pa.Table:
    routed = "router" in pq.read_schema(path).names
    return pq.read_table(path, schema=ROUTED_SCHEMA if routed else RECORD_SCHEMA)


class Recorder:
    """Collects the records of one cell: journal on every call, Parquet at the end.

    While the cell runs, each record goes, pickled and compressed, to a spill file (an
    unnamed temporary file beside the journal) as it comes; memory holds only each call id's
    place in that file, so a job's peak memory stays flat in its calls (a paper-scale cell's
    prompts are tens of KB each).  :meth:`write` reads the records back in call-id order, a
    :data:`CHUNK` at a time: the Parquet is the same, byte for byte, as one write of all of them
    (up to a chunk) or their chunks (beyond); after each chunk Arrow's allocator hands back what
    the chunk freed (:func:`memtrials.io.release_arrow_memory`)."""

    def __init__(self, cell_id: str, records_path: str | os.PathLike[str] | None, journal_dir: str | os.PathLike[str]):
        self.cell_id = cell_id
        self.records_path = Path(records_path) if records_path else None
        safe = cell_id.replace("/", "__").replace(" ", "_")
        self.journal_path = Path(journal_dir) / f"{safe}.jsonl"
        self.journal_path.parent.mkdir(parents=True, exist_ok=True)
        self._where: dict[str, tuple[int, int]] = {}  # call id -> (offset, length) in the spill file
        self._routed = False  # any record with a router value: the file gets ROUTED_SCHEMA
        self._lock = threading.Lock()
        self._spill = SpillFile(self.journal_path.parent, prefix=f".{safe}.")
        self._journal = open(self.journal_path, "a", encoding="utf-8")

    def _keep(self, record: Mapping[str, Any]) -> None:
        self._where[record["call_id"]] = self._spill.put(dict(record))
        self._routed = self._routed or bool(record.get("router"))

    def _read(self, call_ids: Iterable[str]) -> list[dict[str, Any]]:
        return [self._spill.get(self._where[k]) for k in call_ids]

    def add(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self._keep(record)
            self._journal.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
            self._journal.flush()

    def restore(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Take back records of calls made before a resume (already journaled: not again)."""
        with self._lock:
            for record in records:
                if record["call_id"] not in self._where:
                    self._keep(record)

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every record so far, in the order first recorded (read back from the spill file)."""
        with self._lock:
            return self._read(list(self._where))

    def call_ids(self) -> set[str]:
        """The call ids recorded so far (without reading any record)."""
        with self._lock:
            return set(self._where)

    def records_except(self, ids: set[str]) -> list[dict[str, Any]]:
        """The records whose call id is not in ``ids`` (a stream batch's new calls)."""
        with self._lock:
            return self._read([k for k in self._where if k not in ids])

    def write(self) -> None:
        """Write this cell's records as Parquet (if a path was given), sorted by call id: one
        row group, as ``write_parquet`` writes, up to a :data:`CHUNK` of records, else a chunk a
        row group, read back from the spill file a chunk at a time."""
        if self.records_path is None:
            return
        with self._lock:
            ids = sorted(self._where)
            schema = ROUTED_SCHEMA if self._routed else RECORD_SCHEMA
            if len(ids) <= CHUNK:
                write_parquet_atomic(records_table(self._read(ids)), self.records_path)
                return
            # a chunk a row group; what each chunk's conversion and encoding freed goes back to the
            # system, so the memory the writes leave is one chunk's, not one a chunk (issue 39)
            write_parquet_groups((records_table(self._read(ids[i:i + CHUNK]), schema)
                                  for i in range(0, len(ids), CHUNK)), schema, self.records_path)

    def close(self) -> None:
        with self._lock:
            if not self._journal.closed:
                self._journal.close()
            if not self._spill.closed:
                self._spill.close()
