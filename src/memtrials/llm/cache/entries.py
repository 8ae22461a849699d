"""Entries of the shards cache and the order in which a key's duplicates resolve.

An entry is where one stored reply of a key lies (shard file and byte offset) and what
orders it: its stored time, the shard it was first written to (``origin``, kept through
compaction) and its line number there.  The stored reply of a key is the first entry by
that order, except that an entry written in mode ``refresh`` supersedes the entries of
earlier runs: then the first entry of the latest refresh run wins.  Every reader, and
compaction, applies the same rule, so they all replay the same reply.
"""

from __future__ import annotations

from typing import NamedTuple


class Entry(NamedTuple):
    at: float
    origin: str
    n: int
    run: str
    refresh: bool
    file: str
    offset: int


def winner_group(entries: list[Entry]) -> list[Entry]:
    """The candidates among a key's entries, sorted (the first is the stored reply)."""
    refreshed = [e for e in entries if e.refresh]
    if refreshed:
        run = max(refreshed).run
        entries = [e for e in entries if e.run == run]
    return sorted(entries)
