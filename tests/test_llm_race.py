"""Concurrent cells that send the same requests: one paid call per key, one reply for all.

Two processes (as two Snakemake jobs are) share one cache and send the same requests at
the same moment to a loopback endpoint that samples (a different reply on every call),
so both miss the cache.  Each key is claimed before it is called: the endpoint sees one
call per key, the other cell waits for the stored reply, both cells' records equal the
cache's entries, and a rerun of either cell replays them byte for byte.  Claims whose
owner is gone are taken over; first-stored-wins stays as the backstop.  Both cache backends
(``cache.backend``: ``sqlite``, ``shards``) run the race and the refresh semantics; the shards
backend's own claim files are tested in tests/test_llm_cache_shards.py.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from memtrials.llm.cache import open_cache
from memtrials.llm.cache.sqlite import Cache
from memtrials.testing import Faults
from tests.conftest import RACE_BARRIER, race_two_cells

N = 24
CALLER = """
import asyncio, json, sys, time
from pathlib import Path
from memtrials.llm import open_client
cfg, out, me, other = json.load(open(sys.argv[1])), sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
async def main():
    async with open_client(cfg, "race/" + me.stem, out) as client:
{barrier}        await asyncio.gather(*(client.complete("loop", [{{"role": "user", "content": f"step one of task {{i}}"}}])
                               for i in range({n})))
        print(json.dumps({{"fresh": client.fresh_calls, "hits": client.cache_hits}}))
asyncio.run(main())
""".format(n=N, barrier=RACE_BARRIER.strip("\n") + "\n")


def _cells(cfg: dict, tmp: Path, tag: str) -> dict[str, dict]:
    """Run cells ``a`` and ``b`` at once; their counters by name."""
    return race_two_cells(CALLER, cfg, tmp, tag)


def _live_claims(cfg: dict, cache) -> int:
    """Claims still held after every cell finished (a stored pointer of the shards backend is not one)."""
    if isinstance(cache, Cache):
        return cache._db.execute("SELECT COUNT(*) FROM claims").fetchone()[0]
    folder = Path(cfg["cache"]["path"]).parent / "claims"
    return sum(json.loads(f.read_text())["state"] == "live" for f in folder.iterdir()
               if not f.name.startswith(".") and ".gone-" not in f.name)


@pytest.mark.parametrize("backend", ["sqlite", "shards"])
def test_racing_cells_keep_the_first_stored_reply(loopback, make_config, tmp_path, backend):
    srv = loopback(policy={"sampled": 7}, faults=Faults(latency_s=1.0))  # both cells send well within it
    cfg = make_config(srv, max_concurrency=64, price=(1.0, 2.0))
    cfg["cache"]["backend"] = backend
    counts = _cells(cfg, tmp_path, "go")

    # both cells missed the cache, and each key was paid for once: the cell that claimed it
    # called, the other waited for its stored reply
    assert srv.stats.completions == N
    assert counts["a"]["fresh"] + counts["b"]["fresh"] == N
    assert all(c["fresh"] + c["hits"] == N for c in counts.values())
    cache = open_cache(cfg["cache"]["path"], backend=backend)
    stored = {r["call_id"]: r for r in cache.records()}
    assert sum(row[1] for row in cache.totals()) == N  # one paid call per key in the ledger
    assert _live_claims(cfg, cache) == 0  # every claim cleared
    cache.close()
    assert len(stored) == N

    a = pq.read_table(tmp_path / "a.parquet").to_pylist()
    b = pq.read_table(tmp_path / "b.parquet").to_pylist()
    assert len(a) == len(b) == N
    for ra, rb in zip(a, b):
        assert ra["cell_id"] == "race/a" and rb["cell_id"] == "race/b"
        assert {**ra, "cell_id": ""} == {**rb, "cell_id": ""}  # the same reply, timing included
        assert {**ra, "cell_id": ""} == {**stored[ra["call_id"]], "cell_id": ""}  # and it is the stored one
    assert len({r["response_text"] for r in a}) == N
    # the journals say the same as the records
    journals = Path(cfg["cache"]["path"]).parent.parent / "records"
    for name, rows in (("a", a), ("b", b)):
        journal = [json.loads(line) for line in (journals / f"race__{name}.jsonl").read_text().splitlines()]
        assert sorted(journal, key=lambda r: r["call_id"]) == rows

    # a rerun of each cell replays the stored replies byte for byte, with no call
    before = {name: (tmp_path / f"{name}.parquet").read_bytes() for name in "ab"}
    srv.reset_stats()
    counts = _cells(cfg, tmp_path, "again")
    assert srv.stats.requests == 0
    assert counts == {"a": {"fresh": 0, "hits": N}, "b": {"fresh": 0, "hits": N}}
    for name in "ab":
        assert (tmp_path / f"{name}.parquet").read_bytes() == before[name]


def _record(cell: str, text: str) -> dict:
    return {"call_id": "k" * 24, "endpoint": "e", "cell_id": cell, "prompt_tokens": 1, "completion_tokens": 1,
            "cost": 0.5, "finished_at": "t", "response_text": text}


@pytest.mark.parametrize("backend", ["sqlite", "shards"])
def test_refresh_replaces_earlier_runs_but_first_writer_wins_within_a_run(tmp_path, backend):
    path = tmp_path / "c.sqlite"
    use = open_cache(path, backend=backend)
    assert use.store("k", _record("a", "old"), "run-1")["response_text"] == "old"
    assert use.store("k", _record("b", "loser"), "run-1")["response_text"] == "old"  # mode use: first wins
    use.close()
    refresh = open_cache(path, "refresh", backend)
    assert refresh.get("k") is None  # refresh never reads
    assert refresh.store("k", _record("a", "new"), "run-2")["response_text"] == "new"  # replaces run-1's
    assert refresh.store("k", _record("b", "late"), "run-2")["response_text"] == "new"  # same run: first wins
    refresh.close()
    off = open_cache(path, "off", backend)
    assert off.store("k", _record("c", "own"), "run-3")["response_text"] == "own"  # off: keeps its own
    off.close()
    use = open_cache(path, backend=backend)
    assert use.get("k")["response_text"] == "new"
    assert use.spent() == 2.5  # every paid call is in the ledger, whichever reply was kept
    use.close()


def test_a_cache_written_before_run_ids_is_migrated(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE responses (key TEXT PRIMARY KEY, endpoint TEXT NOT NULL, record TEXT NOT NULL,"
                     " created_at TEXT NOT NULL);")
    db.execute("INSERT INTO responses VALUES ('k', 'e', ?, 't')", (json.dumps(_record("a", "kept")),))
    db.commit()
    db.close()
    cache = Cache(path, "refresh")
    assert cache.store("k", _record("b", "fresh"), "run-9")["response_text"] == "fresh"
    cache.close()
    assert Cache(path).get("k")["response_text"] == "fresh"


def test_a_claim_makes_the_second_caller_wait_and_a_gone_owner_is_taken_over(tmp_path):
    import socket

    from tests.conftest import dead_pid
    import time

    c = Cache(tmp_path / "c.sqlite")
    assert c.claim("k", "a", stale_s=60) is True
    assert c.claim("k", "a", stale_s=60) is True       # its owner may claim again (a retry)
    assert c.claim("k", "b", stale_s=60) is False      # a live owner: wait
    c.store("k", _record("a", "reply"), "run-1")        # storing clears the claim
    assert c.claim("k", "b", stale_s=60)["response_text"] == "reply"
    assert c._db.execute("SELECT 1 FROM claims WHERE key = 'k'").fetchone() is None
    # a failed call gives its claim back
    assert c.claim("f", "a", stale_s=60) is True
    c.release("f", "a")
    assert c.claim("f", "b", stale_s=60) is True
    # an owner on this host whose process is gone (SIGKILLed) is taken over at once
    dead = dead_pid(2 ** 22 + 12345)
    host = socket.gethostname()
    c._db.execute("INSERT INTO claims VALUES ('d', 'ghost', ?, ?, ?)", (host, dead, time.time()))
    assert c.claim("d", "b", stale_s=3600) is True
    # an owner on another host is waited for until the claim is older than stale_s
    c._db.execute("INSERT INTO claims VALUES ('h', 'far', 'other-host', 1, ?)", (time.time(),))
    assert c.claim("h", "b", stale_s=3600) is False
    c._db.execute("UPDATE claims SET claimed_at = ? WHERE key = 'h'", (time.time() - 7200,))
    assert c.claim("h", "b", stale_s=3600) is True
    # modes that do not read the cache do not claim
    off = Cache(tmp_path / "o.sqlite", mode="off")
    assert off.claim("k", "a", 60) is True and off.claim("k", "b", 60) is True
    c.close()
    off.close()


def test_a_cache_opened_while_another_opener_holds_the_fresh_files_write_lock_waits_to_switch_it_to_wal(tmp_path):
    """Switching a new database to WAL needs an exclusive lock; a connection that finds
    another holding the write lock is answered "database is locked" at once, without its busy
    handler (several jobs opening a fresh cache together; seen in the report test's run).
    The cache waits for the lock instead."""
    import threading

    path = tmp_path / "llm.sqlite"
    reader = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    reader.execute("CREATE TABLE t (x)")  # a fresh file, still in rollback-journal mode
    reader.execute("BEGIN IMMEDIATE")  # another opener part-way through its own switch: a write lock held
    threading.Timer(0.5, reader.execute, ("COMMIT",)).start()
    cache = Cache(path)  # before: sqlite3.OperationalError: database is locked
    assert cache._db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    cache.close()
    reader.close()
