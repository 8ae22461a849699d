"""Response cache and spending ledger in one SQLite file (WAL mode).

The cache key is the SHA-256 of a canonical JSON of everything that determines a
response: the endpoint identity (base URL + model, or the embedded weights' digest),
the messages, every sampling parameter (seed, temperature, top_p, max_tokens, response
format, grammar, extra body) and the caller's explicit ``sample`` index.  Transport
settings (timeouts, retries) are not part of it.  An embedding is cached per text
(:func:`embed_key`).  Entries never expire: a registered
rerun must replay.

Each completed call is committed before the caller sees it, so a process killed with
SIGKILL loses at most its in-flight calls.  Many processes may share the file: SQLite in
WAL mode serialises writers, readers never block.  Values are plain JSON (no pickles).
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any, Mapping, Sequence

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL,
    record TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS ledger (
    call_id TEXT NOT NULL,
    run_id TEXT NOT NULL,
    endpoint TEXT NOT NULL,
    cell_id TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost REAL NOT NULL,
    at TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_run ON ledger(run_id);
CREATE INDEX IF NOT EXISTS ledger_endpoint ON ledger(endpoint);
"""


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(identity: Mapping[str, Any], messages: Any, params: Mapping[str, Any], sample: int) -> str:
    """SHA-256 over everything that determines a response."""
    payload = {"endpoint": dict(identity), "messages": messages, "params": dict(params), "sample": int(sample)}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def embed_key(identity: Mapping[str, Any], text: str, options: Mapping[str, Any]) -> str:
    """SHA-256 of one text's embedding: endpoint identity + the text + dimension/normalisation
    options.  One entry per text, so calls that share some texts reuse those."""
    payload = {"endpoint": dict(identity), "task": "embed", "input": text, "options": dict(options)}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


class Cache:
    """A process-safe response cache plus the ledger of paid calls.

    ``mode``: ``use`` reads and writes; ``refresh`` writes but never reads (every call is
    made again and replaces its entry); ``off`` neither reads nor writes responses.  The
    ledger (what was paid, by which run) is written in every mode, so cost totals and
    caps survive restarts without double counting.
    """

    def __init__(self, path: str | os.PathLike[str], mode: str = "use") -> None:
        if mode not in ("use", "refresh", "off"):
            raise ValueError(f"cache mode must be use, refresh or off, not {mode!r}")
        self.path = Path(path)
        self.mode = mode
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=60000")
        with self._lock:
            self._db.executescript(_SCHEMA)

    def get(self, key: str) -> dict[str, Any] | None:
        if self.mode != "use":
            return None
        with self._lock:
            row = self._db.execute("SELECT record FROM responses WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        """The cached records among ``keys`` (one query per 500 keys)."""
        if self.mode != "use" or not keys:
            return {}
        found: dict[str, dict[str, Any]] = {}
        keys = list(dict.fromkeys(keys))
        with self._lock:
            for i in range(0, len(keys), 500):
                chunk = keys[i:i + 500]
                rows = self._db.execute(
                    f"SELECT key, record FROM responses WHERE key IN ({','.join('?' * len(chunk))})", chunk
                ).fetchall()
                found.update((k, json.loads(r)) for k, r in rows)
        return found

    def store(self, key: str, record: Mapping[str, Any], run_id: str) -> None:
        """Commit a fresh call: its response (unless mode is ``off``) and its ledger entry,
        in one transaction, before the caller sees the result."""
        self.store_many([(key, record)], run_id)

    def store_many(self, items: Sequence[tuple[str, Mapping[str, Any]]], run_id: str,
                   first_wins: bool = False) -> dict[str, dict[str, Any]]:
        """Commit several fresh calls (e.g. the texts of one embeddings request) in one transaction.

        With ``first_wins`` (mode ``use``), an entry that another process stored meanwhile
        is kept, and returned in place of this call's record, so every process replays
        the same response; the ledger still counts this call (it was paid).  Returns the
        stored record of each key.
        """
        verb = "INSERT OR IGNORE" if first_wins and self.mode == "use" else "INSERT OR REPLACE"
        stored = {key: dict(record) for key, record in items}
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for key, record in items:
                    if self.mode != "off":
                        self._db.execute(
                            f"{verb} INTO responses(key, endpoint, record, created_at) VALUES (?, ?, ?, ?)",
                            (key, record["endpoint"], canonical_json(record), record.get("finished_at", "")),
                        )
                        if verb == "INSERT OR IGNORE":
                            (kept,) = self._db.execute("SELECT record FROM responses WHERE key = ?", (key,)).fetchone()
                            stored[key] = json.loads(kept)
                    self._db.execute(
                        "INSERT INTO ledger VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            record["call_id"], run_id, record["endpoint"], record["cell_id"],
                            int(record["prompt_tokens"]), int(record["completion_tokens"]),
                            float(record["cost"]), record["finished_at"],
                        ),
                    )
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        return stored

    def spent(self, *, run_id: str | None = None, endpoint: str | None = None) -> float:
        """USD paid so far, for one run and/or one endpoint (all runs if ``run_id`` is None)."""
        clauses, args = [], []
        if run_id is not None:
            clauses.append("run_id = ?")
            args.append(run_id)
        if endpoint is not None:
            clauses.append("endpoint = ?")
            args.append(endpoint)
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        with self._lock:
            (total,) = self._db.execute(f"SELECT COALESCE(SUM(cost), 0) FROM ledger {where}", args).fetchone()
        return float(total)

    def totals(self) -> list[tuple[str, int, int, int, float]]:
        """Per endpoint: paid calls, prompt tokens, completion tokens, USD."""
        with self._lock:
            return list(
                self._db.execute(
                    "SELECT endpoint, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens), SUM(cost) "
                    "FROM ledger GROUP BY endpoint ORDER BY endpoint"
                )
            )

    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT record FROM responses ORDER BY key").fetchall()
        return [json.loads(r[0]) for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()
