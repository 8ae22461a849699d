"""The index of the shards backend: where each key's entries lie, and the ledger per shard.

Shards (``shards/*.jsonl``, :mod:`memtrials.llm.cache.shards`) are indexed incrementally (at
most every ``refresh_s``): per key, where its entries lie (not the replies), and the ledger
as totals per shard; a shard is read by byte offset, complete lines only (a killed
writer's torn last line is never read).  Compacted bases (``compacted-*.sqlite``,
:mod:`memtrials.llm.cache.base`) are queried by key, and the shards and older bases each
base names as its sources are forgotten.  Duplicates resolve alike everywhere
(:mod:`memtrials.llm.cache.entries`).
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

from memtrials.llm.cache.base import Base
from memtrials.llm.cache.entries import Entry, winner_group


class Shard:
    """What the index knows of one shard file."""

    def __init__(self) -> None:
        self.offset = 0
        self.keys: set[str] = set()
        self.ledger: dict[tuple[str, str], list[float]] = {}
        self.closed = False


class ShardIndex:
    """The index of the shards in ``folder`` (module docstring); ``own``: this process's
    shard, which it indexes as it appends (:meth:`add_own`), never by reading."""

    def __init__(self, folder: Path, own: str, refresh_s: float) -> None:
        self.folder = folder
        self.own = own
        self.refresh_s = refresh_s
        self.lock = threading.RLock()
        self._index: dict[str, list[Entry]] = {}
        self._known: dict[str, Shard] = {}
        self._superseded: set[str] = set()
        self._bases: dict[str, Base] = {}
        self._refreshed = -1e9
        self.unreadable = 0           # lines of other shards that did not parse

    def refresh(self, force: bool = False) -> None:
        """Read what was written since (at most every ``refresh_s`` unless ``force``)."""
        with self.lock:
            if not force and time.monotonic() - self._refreshed < self.refresh_s:
                return
            self._refreshed = time.monotonic()
            listed = set(os.listdir(self.folder))
            bases = sorted(n for n in listed if n.startswith("compacted-") and n.endswith(".sqlite"))
            for name in reversed(bases):  # the newest first: it names the ones it replaces
                if name not in self._bases and name not in self._superseded:
                    try:
                        base = Base(self.folder / name)
                    except sqlite3.Error:  # removed meanwhile
                        continue
                    self._bases[name] = base
                    for source in base.sources:
                        self._supersede(source)
            for name in [n for n in self._bases if n not in listed]:
                self._bases.pop(name).close()
            names = {n for n in listed if n.endswith(".jsonl")}
            for name in sorted(names):
                if name in self._superseded or name == self.own:
                    continue
                try:
                    size = os.stat(self.folder / name).st_size
                except FileNotFoundError:
                    continue
                known = self._known.get(name)
                if known is None or size > known.offset:
                    self._read(name)
            for name in [n for n in self._known if n not in names and n != self.own]:
                self._drop(name)

    def _read(self, name: str) -> None:
        shard = self._known.setdefault(name, Shard())
        try:
            with open(self.folder / name, "rb") as fh:
                fh.seek(shard.offset)
                data = fh.read()
        except FileNotFoundError:
            self._drop(name)
            return
        end = data.rfind(b"\n") + 1  # complete lines only: a torn last line is never read
        pos = 0
        for line in data[:end].split(b"\n")[:-1]:
            try:
                parsed = json.loads(line)
            except json.JSONDecodeError:  # never written so by a shard's owner; counted, not fatal
                self.unreadable += 1
            else:
                self._take(name, shard, parsed, shard.offset + pos)
            pos += len(line) + 1
        shard.offset += end

    def _take(self, name: str, shard: Shard, line: dict[str, Any], offset: int) -> None:
        kind = line["t"]
        if kind == "r":
            entry = Entry(float(line["at"]), line.get("o", name), int(line["n"]), line["run"], bool(line["ref"]),
                          name, offset)
            self._index.setdefault(line["k"], []).append(entry)
            shard.keys.add(line["k"])
        elif kind == "l":
            tally = shard.ledger.setdefault((line["run_id"], line["endpoint"]), [0, 0, 0, 0.0])
            for i, field in enumerate(("calls", "prompt_tokens", "completion_tokens", "cost")):
                tally[i] += line.get(field, 1)
        elif kind == "end":
            shard.closed = True

    def _supersede(self, name: str) -> None:
        """A base replaced shard or base ``name``: forget it and never read it again."""
        self._superseded.add(name)
        if name in self._bases:
            self._bases.pop(name).close()
        self._drop(name)

    def _drop(self, name: str) -> None:
        shard = self._known.pop(name, None)
        if shard is None:
            return
        for key in shard.keys:
            kept = [e for e in self._index.get(key, []) if e.file != name]
            if kept:
                self._index[key] = kept
            else:
                self._index.pop(key, None)

    # -- this process's own shard ----------------------------------------------
    def open_own(self) -> None:
        """Start indexing this process's shard (created empty)."""
        self._known[self.own] = Shard()

    def own_end(self) -> int:
        """The offset where this process's next line goes."""
        return self._known[self.own].offset

    def add_own(self, lines: list[dict[str, Any]], offsets: list[int], end: int) -> None:
        """Index ``lines``, just appended to this process's shard at ``offsets``, up to ``end``."""
        shard = self._known[self.own]
        for line, offset in zip(lines, offsets):
            self._take(self.own, shard, line, offset)
        shard.offset = end

    # -- queries ---------------------------------------------------------------
    def entries(self, key: str) -> list[Entry]:
        """Every entry of ``key``: in the shards read so far and in the base."""
        return list(self._index.get(key, [])) + [e for b in self._bases.values() for e in b.entries(key)]

    def line(self, file: str, offset: int) -> dict[str, Any]:
        """The line of shard ``file`` at ``offset``."""
        with open(self.folder / file, "rb") as fh:
            fh.seek(offset)
            return json.loads(fh.readline())

    def lookup(self, key: str, run_id: str | None = None) -> dict[str, Any] | None:
        """The stored record of ``key`` (of run ``run_id`` only, if given), reading the index."""
        for attempt in range(2):
            with self.lock:
                try:
                    entries = [e for e in self.entries(key) if run_id is None or e.run == run_id]
                    if not entries:
                        return None
                    first = winner_group(entries)[0]
                    if first.offset < 0:
                        return self._bases[first.file].record(key)
                    return self.line(first.file, first.offset)["rec"]
                except (FileNotFoundError, KeyError, sqlite3.Error):  # compacted meanwhile
                    self.refresh(force=True)
        return None

    def tallies(self) -> list[tuple[tuple[str, str], list[float]]]:
        """The ledger: (run, endpoint) -> calls, prompt tokens, completion tokens, cost; per shard and base."""
        self.refresh()
        with self.lock:
            return [(k, v) for s in [*self._known.values(), *self._bases.values()] for k, v in s.ledger.items()]

    def keys(self) -> list[str]:
        """Every key with an entry, sorted."""
        with self.lock:
            return sorted(set(self._index).union(*(b.keys() for b in self._bases.values())))

    def duplicates(self) -> int:
        """Keys in the shards read so far with more than one candidate reply."""
        with self.lock:
            return sum(len(winner_group(self.entries(k))) > 1 for k in self._index)

    # -- what compaction merges --------------------------------------------------
    def shards(self) -> dict[str, bool]:
        """The shards read so far (this process's own included): name -> whether it ended."""
        return {name: shard.closed for name, shard in self._known.items()}

    def shard_keys(self, name: str) -> set[str]:
        """The keys with an entry in shard ``name``."""
        return self._known[name].keys

    def base_names(self) -> list[str]:
        """The compacted bases in use, sorted."""
        return sorted(self._bases)

    def close(self) -> None:
        for base in self._bases.values():
            base.close()
