"""The base of a shards cache: one immutable SQLite file that compaction writes.

Reading every shard's lines at the start of every job would cost each job the whole cache
(a paper preset's replies run to gigabytes), so compaction (:mod:`memtrials.llm.cache.compact`)
moves the finished shards into ``shards/compacted-<time>-<token>.sqlite``: written once under
a temporary name, fsynced and renamed into place, never modified afterwards.  Readers open
it with SQLite's ``immutable=1`` (no locks, no journal, no shared memory: safe on any
network filesystem because nobody writes it) and look keys up through its primary-key
index, so a job reads only the pages it needs; only the shards written since the last
compaction are read line by line.  Its ``sources`` table names the shards and earlier bases
it replaces, which readers then ignore.
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.parse
from pathlib import Path
from typing import Any, Iterable

from memtrials.llm.cache.entries import Entry

SCHEMA = """
CREATE TABLE responses (key TEXT PRIMARY KEY, at REAL NOT NULL, origin TEXT NOT NULL, n INTEGER NOT NULL,
                        run TEXT NOT NULL, ref INTEGER NOT NULL, record TEXT NOT NULL);
CREATE TABLE ledger (call_id TEXT NOT NULL, run_id TEXT NOT NULL, endpoint TEXT NOT NULL, cell_id TEXT NOT NULL,
                     prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL, cost REAL NOT NULL,
                     at TEXT NOT NULL);
CREATE TABLE sources (name TEXT PRIMARY KEY);
"""


def _uri(path: Path) -> str:
    return f"file:{urllib.parse.quote(str(path))}?immutable=1"


class Base:
    """One compacted base, open read-only (module docstring)."""

    def __init__(self, path: Path) -> None:
        self.name = path.name
        self.db = sqlite3.connect(_uri(path), uri=True, check_same_thread=False)
        self.sources = [row[0] for row in self.db.execute("SELECT name FROM sources")]
        self.ledger = {(run, ep): [n, pt, ct, cost] for run, ep, n, pt, ct, cost in self.db.execute(
            "SELECT run_id, endpoint, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost) "
            "FROM ledger GROUP BY run_id, endpoint")}

    def entries(self, key: str) -> list[Entry]:
        row = self.db.execute("SELECT at, origin, n, run, ref FROM responses WHERE key = ?", (key,)).fetchone()
        return [Entry(float(row[0]), row[1], int(row[2]), row[3], bool(row[4]), self.name, -1)] if row else []

    def record(self, key: str) -> dict[str, Any]:
        (record,) = self.db.execute("SELECT record FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(record)

    def keys(self) -> list[str]:
        return [row[0] for row in self.db.execute("SELECT key FROM responses")]

    def close(self) -> None:
        self.db.close()


def write_base(final: Path, bases: list[Path], replies: Iterable[tuple[Any, ...]],
               ledger: Iterable[tuple[Any, ...]], sources: list[str]) -> None:
    """Write a new base at ``final``: the rows of ``bases``, then ``replies`` (key, at, origin,
    n, run, ref, record JSON; each replaces a base's row of its key) and ``ledger`` rows."""
    tmp = final.parent / f".{final.name}.tmp"
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(f"file:{urllib.parse.quote(str(tmp))}", uri=True)
    try:
        db.execute("PRAGMA journal_mode=OFF")  # one writer, a temporary file: nothing to roll back
        db.execute("PRAGMA synchronous=OFF")   # fsynced whole below
        db.executescript(SCHEMA)
        for i, base in enumerate(bases):
            db.execute(f"ATTACH DATABASE ? AS old{i}", (_uri(base),))
            db.execute(f"INSERT OR REPLACE INTO responses SELECT * FROM old{i}.responses")
            db.execute(f"INSERT INTO ledger SELECT * FROM old{i}.ledger")
            db.commit()
            db.execute(f"DETACH DATABASE old{i}")
        db.executemany("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?, ?, ?)", replies)
        db.executemany("INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?)", ledger)
        db.executemany("INSERT INTO sources VALUES (?)", [(s,) for s in sources])
        db.commit()
    finally:
        db.close()
    with open(tmp, "rb+") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, final)
