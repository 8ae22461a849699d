"""Response cache and spending ledger in one SQLite file (WAL mode).

Replies are stored under their cache key (:mod:`memtrials.llm.cache.keys`: the SHA-256 of
everything that determines a response).  Entries never expire: a registered rerun must
replay.

Each completed call is committed before the caller sees it, so a process killed with
SIGKILL loses at most its in-flight calls.  Many processes may share the file: SQLite in
WAL mode serialises writers, readers never block.  Values are plain JSON (no pickles).

**The first stored reply wins.**  Two cells (separate Snakemake jobs, so separate
processes) that send the same request at the same moment both miss the cache.  Whichever
commits first stores its reply; a later commit of the same key keeps that entry
(``INSERT OR IGNORE``), reads it back and goes on with *it*, so both cells record, and
every rerun replays, the one stored reply (a paid duplicate still goes in the ledger).
Chat completions and embeddings use this one mechanism (:meth:`Cache.store_many`).

**A chat call is claimed before it is made** (:meth:`Cache.claim`, mode ``use``), so the
race above costs one paid call, not two: the first process to miss the cache records a
claim on the key (owner, host, pid, time) in the same file; another process that misses
the same key finds the claim and waits for the stored reply instead of calling (the
client polls :meth:`Cache.claim`, which returns the reply once stored), and the claim is removed in the transaction that stores the
reply (or released if the call fails).  A claim whose owner is gone is taken over: on
the same host when its process no longer exists (a SIGKILLed cell), on another host
once it is older than ``stale_s`` (the longest a call with all its retries may take).
First-stored-wins above stays as the backstop (a claim taken over from a slow owner
whose reply then lands).  Embeddings, sent in batches of texts, use first-stored-wins
alone.

In mode ``refresh`` the entry a *previous* run stored is replaced, but within one run the
first writer still wins (each entry remembers the run that stored it), so the cells of a
refresh run agree with each other and with the cache.

**Backends** (``cache.backend``, :func:`memtrials.llm.cache.backends.open_cache`): ``sqlite``
(this class) for jobs on one machine; ``shards`` (:class:`memtrials.llm.cache.shards.ShardCache`,
same methods) when jobs run on different hosts over a network filesystem, where SQLite's WAL
is not safe.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from memtrials.llm.cache.keys import canonical_json
from memtrials.machine import alive

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL,
    record TEXT NOT NULL,
    created_at TEXT NOT NULL,
    run_id TEXT NOT NULL DEFAULT ''
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
CREATE TABLE IF NOT EXISTS claims (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    claimed_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS ledger_run ON ledger(run_id);
CREATE INDEX IF NOT EXISTS ledger_endpoint ON ledger(endpoint);
"""


def _claim_gone(host: str, pid: int, claimed_at: float, stale_s: float, here: str, now: float) -> bool:
    """Whether a recorded claim's owner can no longer be waited for: its process is gone
    (same host), or the claim outlived the longest call with every retry."""
    if host == here and not alive(pid):
        return True
    return now - claimed_at > stale_s


# filesystems whose files other hosts share: SQLite's WAL (shared memory beside the file)
# is not safe on them (https://www.sqlite.org/wal.html, "WAL does not work over a network
# filesystem")
NETWORK_FILESYSTEMS = frozenset({
    "nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "glusterfs", "fuse.glusterfs",
    "ceph", "fuse.ceph", "fuse.sshfs", "afs", "gfs2", "ocfs2", "fuse.s3fs", "fuse.gcsfuse",
})


def filesystem_type(path: str | os.PathLike[str], mountinfo: str = "/proc/self/mountinfo") -> str | None:
    """The type of the filesystem holding ``path`` (the longest mount point above it in
    ``mountinfo``), or None where that file cannot be read (not Linux)."""
    target = os.path.realpath(path)
    best, kind = "", None
    try:
        lines = Path(mountinfo).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right:
            continue
        point = fields[4].replace("\\040", " ")
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, right.split()[0]
    return kind


def _enable_wal(db: sqlite3.Connection, wait_s: float = 60.0) -> None:
    """Put the cache in WAL mode, waiting while another process does the same.  Switching a
    new database to WAL takes an exclusive lock, and SQLite answers a connection that races
    for it with "database is locked" at once, without its busy handler: several jobs opening
    a fresh cache together hit that (about one start in 30 with 8 openers).  Once one of them
    has switched it, the mode is stored in the file and the pragma takes no lock."""
    deadline = time.monotonic() + wait_s
    delay = 0.01
    while True:
        try:
            db.execute("PRAGMA journal_mode=WAL").fetchone()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.2)


def _refuse_network_filesystem(path: Path) -> None:
    kind = filesystem_type(path.parent)
    if kind in NETWORK_FILESYSTEMS:
        raise ValueError(
            f"cache.path = {path} is on a network filesystem ({kind}), where SQLite's WAL mode is not safe "
            f"(jobs on other hosts would corrupt or miss entries). Fix: set cache.backend: shards (an overlay "
            f"with cache: {{backend: shards}}, or --config 'cache={{backend: shards}}'; the slurm and "
            f"kubernetes profiles set it), or move cache.path to a local disk."
        )


class Cache:
    """A process-safe response cache plus the ledger of paid calls.

    ``mode``: ``use`` reads and writes (first stored reply wins); ``refresh`` writes but
    never reads (every call is made again; its reply replaces an entry stored by an
    earlier run, while within this run the first stored reply wins); ``off`` neither reads
    nor writes responses (each call keeps its own reply).  The
    ledger (what was paid, by which run) is written in every mode, so cost totals and
    caps survive restarts without double counting.
    """

    def __init__(self, path: str | os.PathLike[str], mode: str = "use") -> None:
        if mode not in ("use", "refresh", "off"):
            raise ValueError(f"cache mode must be use, refresh or off, not {mode!r}")
        self.path = Path(path)
        self.mode = mode
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _refuse_network_filesystem(self.path)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
        _enable_wal(self._db)
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("PRAGMA busy_timeout=60000")
        with self._lock:
            self._db.executescript(_SCHEMA)
            self._migrate()

    def _migrate(self) -> None:
        """Add ``responses.run_id`` to a cache written before it existed (once, under a write lock)."""
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(responses)")}
        if "run_id" in columns:
            return
        self._db.execute("BEGIN IMMEDIATE")
        try:
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(responses)")}
            if "run_id" not in columns:
                self._db.execute("ALTER TABLE responses ADD COLUMN run_id TEXT NOT NULL DEFAULT ''")
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

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

    def claim(self, key: str, owner: str, stale_s: float) -> dict[str, Any] | bool:
        """Claim ``key`` before calling: ``True`` (this caller makes the call), ``False``
        (another live caller holds it: ask again later), or the stored record
        (it landed meanwhile).  Only in mode ``use``; other modes always return ``True``."""
        if self.mode != "use":
            return True
        host, pid, now = socket.gethostname(), os.getpid(), time.time()
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                row = self._db.execute("SELECT record FROM responses WHERE key = ?", (key,)).fetchone()
                if row:
                    self._db.execute("COMMIT")
                    return json.loads(row[0])
                held = self._db.execute("SELECT owner, host, pid, claimed_at FROM claims WHERE key = ?",
                                        (key,)).fetchone()
                if held is not None and held[0] != owner and not _claim_gone(held[1], int(held[2]), held[3],
                                                                             stale_s, host, now):
                    self._db.execute("COMMIT")
                    return False
                self._db.execute("INSERT OR REPLACE INTO claims(key, owner, host, pid, claimed_at) "
                                 "VALUES (?, ?, ?, ?, ?)", (key, owner, host, pid, now))
                self._db.execute("COMMIT")
                return True
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    def release(self, key: str, owner: str) -> None:
        """Give back a claim whose call failed (another caller may then make it)."""
        if self.mode != "use":
            return
        with self._lock:
            self._db.execute("DELETE FROM claims WHERE key = ? AND owner = ?", (key, owner))

    def store(self, key: str, record: Mapping[str, Any], run_id: str) -> dict[str, Any]:
        """Commit a fresh call: its response (unless mode is ``off``) and its ledger entry,
        in one transaction, before the caller sees the result.  Returns the stored
        record, which is another process's if that one committed the same key first."""
        return self.store_many([(key, record)], run_id)[key]

    def store_many(self, items: Sequence[tuple[str, Mapping[str, Any]]], run_id: str,
                   first_wins: bool = True) -> dict[str, dict[str, Any]]:
        """Commit several fresh calls (e.g. the texts of one embeddings request) in one transaction.

        The first stored reply wins (module docstring): an entry already stored (mode
        ``use``), or stored by this same run (mode ``refresh``), is kept and returned in
        place of this call's record, so every process goes on with, and replays, the same
        response; the ledger still counts this call (it was paid).  ``first_wins=False``
        overwrites instead (last writer wins; nothing in the pipeline uses it).  Returns the
        stored record of each key (this call's own in mode ``off``).
        """
        if not first_wins:
            sql = ("INSERT OR REPLACE INTO responses(key, endpoint, record, created_at, run_id) "
                   "VALUES (?, ?, ?, ?, ?)")
        elif self.mode == "refresh":
            sql = ("INSERT INTO responses(key, endpoint, record, created_at, run_id) VALUES (?, ?, ?, ?, ?) "
                   "ON CONFLICT(key) DO UPDATE SET endpoint = excluded.endpoint, record = excluded.record, "
                   "created_at = excluded.created_at, run_id = excluded.run_id "
                   "WHERE responses.run_id != excluded.run_id")
        else:
            sql = ("INSERT OR IGNORE INTO responses(key, endpoint, record, created_at, run_id) "
                   "VALUES (?, ?, ?, ?, ?)")
        stored = {key: dict(record) for key, record in items}
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for key, record in items:
                    if self.mode != "off":
                        written = self._db.execute(
                            sql, (key, record["endpoint"], canonical_json(record), record.get("finished_at", ""),
                                  run_id),
                        ).rowcount
                        if not written:  # another call stored this key first: go on with its reply
                            (kept,) = self._db.execute("SELECT record FROM responses WHERE key = ?", (key,)).fetchone()
                            stored[key] = json.loads(kept)
                    self._db.execute("DELETE FROM claims WHERE key = ?", (key,))
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
