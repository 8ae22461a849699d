"""Compaction of the shards backend: many shards into one file, while a run may go on.

Only shards no process will append to again are merged: those that end with the
``end`` line their cache wrote on close, those whose process on this host no longer exists
(a killed job: its last line may be torn and is dropped), and earlier compacted files.  The
merged file keeps, for each key, the stored reply only (:func:`~hindsight.llm.cache_entries.winner_group`,
so what every reader replays does not change) with its original stored time, shard and line
(the order duplicates resolve by), and every ledger row.  Its first line names its
sources; it is written under a temporary name, fsynced and renamed into ``shards/``; readers
that see it drop its sources, which are then removed.  Run it between runs or during one:
``python -m hindsight cache compact``.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from typing import TYPE_CHECKING, Any

from hindsight.llm.cache_entries import winner_group
from hindsight.llm.leases import alive

if TYPE_CHECKING:
    from hindsight.llm.cache_shards import ShardCache


def finished(name: str, closed: bool) -> bool:
    """Whether no process will append to shard ``name`` again."""
    if closed or name.startswith("compacted-"):
        return True
    host, _, rest = name.partition("__")
    pid = rest.split("__", 1)[0]
    return host == socket.gethostname().replace("__", "_") and pid.isdigit() and not alive(int(pid))


def compact(cache: "ShardCache") -> dict[str, int]:
    """Merge ``cache``'s finished shards into one (module docstring); returns counts:
    ``sources``, ``entries`` (replies kept), ``dropped`` (superseded or duplicate replies),
    ``ledger`` rows and ``claims`` swept."""
    cache._refresh(force=True)
    with cache._lock:
        sources = sorted(n for n, s in cache._known.items() if n != cache.name and finished(n, s.closed))
        if not sources:
            return {"sources": 0, "entries": 0, "dropped": 0, "ledger": 0, "claims": cache.claims.sweep()}
        index = {k: list(v) for k, v in cache._index.items()}
    lines: dict[str, list[bytes]] = {}
    for name in sources:
        with open(cache.shards / name, "rb") as fh:
            data = fh.read()
        lines[name] = [line + b"\n" for line in data[:data.rfind(b"\n") + 1].split(b"\n")[:-1]]
    chosen: dict[tuple[str, int], str] = {}
    dropped = 0
    for key, entries in index.items():
        group = [e for e in entries if e.file in lines]
        if not group:
            continue
        first = winner_group(entries)[0]
        if first.file in lines:
            chosen[(first.file, first.offset)] = key
        dropped += len(group) - (first.file in lines)
    out: list[bytes] = [json.dumps({"t": "h", "sources": sources}).encode() + b"\n"]
    entries_kept = ledger = 0
    for name in sources:
        offset = 0
        for raw in lines[name]:
            try:
                line: dict[str, Any] = json.loads(raw)
            except json.JSONDecodeError:  # unreadable (counted by readers): not carried over
                line = {"t": "?"}
                dropped += 1
            if line["t"] == "r" and (name, offset) in chosen:
                line.setdefault("o", name)
                out.append(json.dumps(line, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
                           + b"\n")
                entries_kept += 1
            elif line["t"] == "l":
                out.append(raw)
                ledger += 1
            offset += len(raw)
    out.append(json.dumps({"t": "end"}).encode() + b"\n")
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    final = cache.shards / f"compacted-{stamp}-{uuid.uuid4().hex[:8]}.jsonl"
    tmp = cache.shards / f".{final.name}.tmp"
    with open(tmp, "wb") as fh:
        fh.write(b"".join(out))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, final)
    for name in sources:
        (cache.shards / name).unlink(missing_ok=True)
    cache._refresh(force=True)
    return {"sources": len(sources), "entries": entries_kept, "dropped": dropped, "ledger": ledger,
            "claims": cache.claims.sweep()}
