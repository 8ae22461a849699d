"""Compaction of the shards backend: the finished shards into one base, while a run may go on.

Only shards no process will append to again are merged: those that end with the ``end``
line their cache wrote on close, and those whose process on this host no longer exists (a
killed job: its torn last line is dropped).  With the current base
(:mod:`memtrials.llm.cache.base`) they become a new base, an immutable SQLite file holding,
for each key, the stored reply only (:func:`~memtrials.llm.cache.entries.winner_group` over
every entry, so what readers replay does not change) with its original stored time, shard
and line, and every ledger row.  Its ``sources`` table names what it replaces; readers that
see it ignore those, which are then removed.  One compaction runs at a time
(``shards/.compacting``).  Run it between runs or during one: ``python -m memtrials cache compact``.
"""


from __future__ import annotations

import json
import os
import socket
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memtrials.io import canonical_json
from memtrials.llm.cache.base import write_base
from memtrials.llm.cache.entries import winner_group
from memtrials.machine import alive

if TYPE_CHECKING:
    from memtrials.llm.cache.claims import ClaimBook
    from memtrials.llm.cache.index import ShardIndex


def finished(name: str, closed: bool) -> bool:
    """Whether no process will append to shard ``name`` again."""
    if closed:
        return True
    host, _, rest = name.partition("__")
    pid = rest.split("__", 1)[0]
    return host == socket.gethostname().replace("__", "_") and pid.isdigit() and not alive(int(pid))


def _lock(folder: Path) -> Path | None:
    """One compaction at a time: ``shards/.compacting`` created exclusively (taken over
    when its process is gone on this host, or after an hour)."""
    lock = folder / ".compacting"
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                host, pid = lock.read_text().split()
                stale = (host == socket.gethostname() and not alive(int(pid))) or \
                    time.time() - lock.stat().st_mtime > 3600
            except (FileNotFoundError, ValueError):
                stale = True
            if not stale:
                return None
            lock.unlink(missing_ok=True)
            continue
        os.write(fd, f"{socket.gethostname()} {os.getpid()}".encode())
        os.close(fd)
        return lock
    return None


def compact(index: "ShardIndex", claims: "ClaimBook") -> dict[str, int]:
    """Merge the finished shards and the current base of ``index`` (a shards cache's,
    :attr:`memtrials.llm.cache.shards.ShardCache.index`) into a new base (module docstring),
    then sweep ``claims``; returns counts: ``sources``, ``entries`` (replies moved from
    shards), ``dropped`` (superseded, duplicate or unreadable lines), ``ledger`` rows moved
    and ``claims`` swept."""
    lock = _lock(index.folder)
    if lock is None:
        raise RuntimeError(f"{index.folder}: another compaction is running (.compacting); try again later")
    try:
        return _compact(index, claims)
    finally:
        lock.unlink(missing_ok=True)


def _compact(index: "ShardIndex", claims: "ClaimBook") -> dict[str, int]:
    folder = index.folder
    index.refresh(force=True)
    with index.lock:
        shards = sorted(n for n, closed in index.shards().items() if n != index.own and finished(n, closed))
        bases = index.base_names()
        if not shards and len(bases) <= 1:
            return {"sources": 0, "entries": 0, "dropped": 0, "ledger": 0, "claims": claims.sweep()}
        keys = sorted({k for n in shards for k in index.shard_keys(n)})
        winners = {}
        for key in keys:
            entries = index.entries(key)
            winners[key] = winner_group(entries)[0]
    replies, ledger, moved, dropped = [], [], 0, 0
    for name in shards:
        with open(folder / name, "rb") as fh:
            data = fh.read()
        offset = 0
        for raw in data[:data.rfind(b"\n") + 1].split(b"\n")[:-1]:
            try:
                line: dict[str, Any] = json.loads(raw)
            except json.JSONDecodeError:  # unreadable (counted by readers): not carried over
                line = {"t": "?"}
                dropped += 1
            if line["t"] == "r":
                first = winners.get(line["k"])
                if first is not None and (first.file, first.offset) == (name, offset):
                    replies.append((line["k"], float(line["at"]), line.get("o", name), int(line["n"]), line["run"],
                                    int(bool(line["ref"])), canonical_json(line["rec"], indent=None,
                                                                            newline=False)))
                    moved += 1
                else:
                    dropped += 1
            elif line["t"] == "l":
                ledger.append((line["call_id"], line["run_id"], line["endpoint"], line["cell_id"],
                               int(line["prompt_tokens"]), int(line["completion_tokens"]), float(line["cost"]),
                               line["at"]))
            offset += len(raw) + 1
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    final = folder / f"compacted-{stamp}-{uuid.uuid4().hex[:8]}.sqlite"
    write_base(final, [folder / b for b in bases], replies, ledger, shards + bases)
    for name in shards + bases:
        (folder / name).unlink(missing_ok=True)
    index.refresh(force=True)
    return {"sources": len(shards) + len(bases), "entries": moved, "dropped": dropped, "ledger": len(ledger),
            "claims": claims.sweep()}
