"""The response cache as append-only shards: correct when jobs run on different hosts.

SQLite's WAL needs shared memory on one host and its rollback journal needs POSIX locks,
which NFS implements unreliably, so this backend (``cache.backend: shards``, selected by the
cluster profiles; README, "Scale-out") takes no lock at all:

* **Shards.**  Each open cache appends to its own ``shards/<host>__<pid>__<token>.jsonl``:
  one JSON line per reply or ledger row, one ``write`` and ``fdatasync`` per stored batch
  before the caller sees it; nobody modifies another's shard.  JSON lines, not an SQLite
  file per shard: another host reads a growing file by byte offset without a lock, taking
  complete lines only (a killed writer's torn last line is never read).
* **Reading** (:mod:`memtrials.llm.cache.index`).  Shards are indexed incrementally (at most
  every ``refresh_s``): per key, where its entries lie (not the replies), and the ledger as
  totals per shard.  Duplicates resolve alike everywhere (:mod:`memtrials.llm.cache.entries`);
  :meth:`ShardCache.duplicates` counts them.
* **Claims** (:mod:`memtrials.llm.cache.claims`): one call per key across hosts, and
  storing needs the key's claim too (taken at store time for embeddings and in mode
  ``refresh``), so one process appends each key's reply and the first stored reply wins;
  even an owner whose claim was taken over waits for the taker's reply.
* **Compaction** (:mod:`memtrials.llm.cache.compact`) moves finished shards into an
  immutable SQLite base queried by key (:mod:`memtrials.llm.cache.base`), so a job reads
  line by line only what was written since.

The public interface is :class:`memtrials.llm.cache.sqlite.Cache`'s.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from pathlib import Path
from typing import Any, Mapping, Sequence

from memtrials.io import canonical_json
from memtrials.llm.cache.claims import ClaimBook
from memtrials.llm.cache.index import ShardIndex


class ShardCache:
    """The shards backend (module docstring); same methods as :class:`~memtrials.llm.cache.sqlite.Cache`."""

    def __init__(self, path: str | os.PathLike[str], mode: str = "use", *, refresh_s: float = 0.25,
                 grace_s: float | None = None, lost_after_s: float | None = None,
                 heartbeat_s: float | None = None) -> None:
        """``refresh_s``: the longest a reader goes without looking for new shards and lines;
        ``grace_s``, ``lost_after_s``, ``heartbeat_s``: :mod:`memtrials.llm.cache.claims`."""
        if mode not in ("use", "refresh", "off"):
            raise ValueError(f"cache mode must be use, refresh or off, not {mode!r}")
        self.path = Path(path)
        self.mode = mode
        self.root = self.path.parent
        self.shards = self.root / "shards"
        self.shards.mkdir(parents=True, exist_ok=True)
        host = socket.gethostname().replace("__", "_")
        self.name = f"{host}__{os.getpid()}__{uuid.uuid4().hex[:12]}.jsonl"
        extra = {k: v for k, v in (("grace_s", grace_s), ("lost_after_s", lost_after_s),
                                   ("heartbeat_s", heartbeat_s)) if v is not None}
        self.claims = ClaimBook(self.root / "claims", self.name, **extra)
        self.index = ShardIndex(self.shards, self.name, refresh_s)
        self._lock = self.index.lock
        self._fh: Any = None
        self._n = 0
        self._closed = False
        self._owner = self.name       # the claim owner when storing without a prior claim
        self._stale_s = 3600.0        # the client's claim_stale_s, once it has claimed
        self._unseen: dict[tuple[str, str], float] = {}  # (key, pointer token) -> first found unreadable
        self.claims.sweep()

    @property
    def unreadable(self) -> int:
        """Lines of other shards that did not parse."""
        return self.index.unreadable

    def _get(self, key: str, run_id: str | None = None) -> dict[str, Any] | None:
        got = self.index.lookup(key, run_id)
        if got is None:
            self.index.refresh()
            got = self.index.lookup(key, run_id)
        return got

    # -- writing ---------------------------------------------------------------
    def _open_shard(self) -> None:
        if self._closed:
            raise ValueError(f"{self.shards}: this cache was closed; open a new one to store or claim")
        if self._fh is None:
            self._fh = open(self.shards / self.name, "ab")
            os.fsync(self._fh.fileno())
            self.index.open_own()

    def _append(self, lines: list[dict[str, Any]]) -> list[int]:
        """Append lines to this process's shard (one write, one fsync); their offsets."""
        self._open_shard()
        chunks, offsets, pos = [], [], self.index.own_end()
        for line in lines:
            if line["t"] == "r":
                line["n"] = self._n
                self._n += 1
            raw = canonical_json(line, indent=None).encode()  # one line, compact, newline-terminated
            offsets.append(pos)
            chunks.append(raw)
            pos += len(raw)
        self._fh.write(b"".join(chunks))
        self._fh.flush()
        os.fdatasync(self._fh.fileno())  # on the server before any claim points at it
        self.index.add_own(lines, offsets, pos)
        return offsets

    def _hold(self, key: str, run_id: str) -> str | dict[str, Any]:
        """Hold ``key``'s claim in order to store it: ``"held"`` (this caller's claim, made
        before the call), ``"taken"`` (taken now), or the record another process stored
        (its claim still points at it)."""
        delay = 0.002
        while True:
            if self.claims.owns(key):
                return "held"
            got = self.claims.try_claim(key, self._owner)
            if got is True:
                return "taken"
            assert isinstance(got, dict)
            if got.get("state") == "stored":
                wait = False
                if self.mode == "use" or got.get("run") == run_id:
                    record = self._pointed(key, got)
                    if record is not None:
                        return record
                    wait = not self._pointer_lost(key, got)
                # a pointer at an earlier run's reply (mode refresh) or at nothing for long: replace it
                if not wait and self.claims.take_over(key, got.get("token", "?"), self._owner):
                    return "taken"
            elif self.claims.gone(got, got["mtime"], self._stale_s):
                if self.claims.take_over(key, got.get("token", "?"), self._owner):
                    return "taken"
            time.sleep(delay)
            delay = min(delay * 2, 0.05)

    def _pointed(self, key: str, claim: Mapping[str, Any]) -> dict[str, Any] | None:
        """The record a stored claim points at (None if that shard was compacted away)."""
        try:
            line = self.index.line(str(claim["file"]), int(claim["offset"]))
        except (FileNotFoundError, json.JSONDecodeError):
            self.index.refresh(force=True)
            record = self.index.lookup(key)
        else:
            record = line["rec"] if line.get("k") == key else self.index.lookup(key)
        if record is not None:  # readable now: no longer waited for
            with self._lock:
                self._unseen.pop((key, str(claim.get("token", "?"))), None)
        return record

    def _pointer_lost(self, key: str, claim: Mapping[str, Any]) -> bool:
        """Whether a stored claim whose record this process cannot read may be replaced:
        only once it has stayed unreadable for ``lost_after_s`` here.  Until then the reply
        is taken to be on its way to this host's view (a network filesystem client may go
        on serving a shard's old size, or an old listing, from its caches)."""
        now = time.monotonic()
        seen = (key, str(claim.get("token", "?")))
        with self._lock:
            lost = now - self._unseen.setdefault(seen, now) > self.claims.lost_after_s
            if lost:  # the caller replaces it (or another process did): not waited for again
                del self._unseen[seen]
        return lost

    def store(self, key: str, record: Mapping[str, Any], run_id: str) -> dict[str, Any]:
        """Store a fresh call's reply and ledger row; returns the stored reply (another
        process's if it stored the key first)."""
        return self.store_many([(key, record)], run_id)[key]

    def store_many(self, items: Sequence[tuple[str, Mapping[str, Any]]], run_id: str,
                   first_wins: bool = True) -> dict[str, dict[str, Any]]:
        """Store several fresh calls; the first stored reply of each key wins (module docstring).
        ``first_wins=False`` makes this call's reply the stored one (last writer wins)."""
        stored = {key: dict(record) for key, record in items}
        at = time.time()
        with self._lock:
            lines: list[dict[str, Any]] = []
            mine: list[str] = []
            held: list[str] = []
            if self.mode != "off":
                holds = {key: self._hold(key, run_id) for key in sorted({k for k, _ in items})}
                if "taken" in holds.values():  # not claimed before the call: look once more
                    self.index.refresh(force=True)
                for key, got in holds.items():
                    if isinstance(got, dict):
                        kept: dict[str, Any] | None = got
                    else:
                        held.append(key)
                        kept = self.index.lookup(key, run_id if self.mode == "refresh" else None)
                    if kept is not None and first_wins:
                        stored[key] = kept
                    else:
                        mine.append(key)
                for key in mine:
                    run = run_id if first_wins else f"{run_id}/last-writer/{uuid.uuid4().hex}"
                    lines.append({"t": "r", "k": key, "run": run, "at": at,
                                  "ref": self.mode == "refresh" or not first_wins, "rec": stored[key]})
            for _, record in items:
                lines.append({"t": "l", "call_id": record["call_id"], "run_id": run_id,
                              "endpoint": record["endpoint"], "cell_id": record["cell_id"],
                              "prompt_tokens": int(record["prompt_tokens"]),
                              "completion_tokens": int(record["completion_tokens"]),
                              "cost": float(record["cost"]), "at": record["finished_at"], "calls": 1})
            offsets = dict(zip(mine, self._append(lines)))
            for key in held:
                if key in offsets:
                    self.claims.mark_stored(key, self.name, offsets[key], run_id)
                else:  # stored before this claim was taken: the index shows it to everyone
                    self.claims.release(key)
        return stored

    # -- claims ----------------------------------------------------------------
    def claim(self, key: str, owner: str, stale_s: float) -> dict[str, Any] | bool:
        """Claim ``key`` before calling: ``True`` (this caller calls), ``False`` (another live
        caller holds it), or the stored record.  Only in mode ``use``; otherwise ``True``."""
        if self.mode != "use":
            return True
        with self._lock:
            self._owner, self._stale_s = owner, stale_s
            self._open_shard()  # a waiter may read this shard by name once the claim says so
            found = self._get(key)
            if found is not None:
                return found
            got = self.claims.try_claim(key, owner)
            if got is True:
                self.index.refresh(force=True)  # stored and pointer expired before we looked
                found = self.index.lookup(key)
                if found is not None:
                    self.claims.release(key)
                    return found
                return True
            assert isinstance(got, dict)
            if got.get("state") == "stored":  # a pointer at nothing for long is replaced
                record = self._pointed(key, got)
                if record is not None:
                    return record
                if not self._pointer_lost(key, got):
                    return False
                return self.claims.take_over(key, got.get("token", "?"), owner)
            if got.get("owner") == owner and got.get("pid") == os.getpid():
                self.claims.hold(key, got["token"])  # its own claim again (a retry)
                return True
            if self.claims.gone(got, got["mtime"], stale_s):
                return self.claims.take_over(key, got.get("token", "?"), owner)
            return False

    def release(self, key: str, owner: str) -> None:
        """Give back a claim whose call failed."""
        if self.mode == "use":
            self.claims.release(key)

    # -- reading ---------------------------------------------------------------
    def get(self, key: str) -> dict[str, Any] | None:
        return self._get(key) if self.mode == "use" else None

    def get_many(self, keys: Sequence[str]) -> dict[str, dict[str, Any]]:
        if self.mode != "use" or not keys:
            return {}
        self.index.refresh()
        return {k: r for k in dict.fromkeys(keys) if (r := self.index.lookup(k)) is not None}

    def spent(self, *, run_id: str | None = None, endpoint: str | None = None) -> float:
        return float(sum(t[3] for (run, ep), t in self.index.tallies()
                         if (run_id is None or run == run_id) and (endpoint is None or ep == endpoint)))

    def totals(self) -> list[tuple[str, int, int, int, float]]:
        per: dict[str, list[float]] = {}
        for (_, ep), t in self.index.tallies():
            acc = per.setdefault(ep, [0, 0, 0, 0.0])
            for i in range(4):
                acc[i] += t[i]
        return [(ep, int(a[0]), int(a[1]), int(a[2]), float(a[3])) for ep, a in sorted(per.items())]

    def records(self) -> list[dict[str, Any]]:
        self.index.refresh(force=True)
        return [r for k in self.index.keys() if (r := self.index.lookup(k)) is not None]

    def duplicates(self) -> int:
        """Keys with more than one candidate reply (should be 0 with claims)."""
        self.index.refresh(force=True)
        return self.index.duplicates()

    def close(self) -> None:
        with self._lock:
            if self._fh is not None:
                self._append([{"t": "end"}])
                self._fh.close()
                self._fh = None
            self._closed = True  # its shard may now be compacted away: never append to it again
            self.claims.expire(everything=False)
            self.claims.close()
            self.index.close()

    # -- compaction --------------------------------------------------------------
    def compact(self) -> dict[str, int]:
        """Merge the shards of closed processes (and earlier compactions) into one file
        (only the stored reply of each key, every ledger row); returns counts."""
        from memtrials.llm.cache.compact import compact

        return compact(self.index, self.claims)
