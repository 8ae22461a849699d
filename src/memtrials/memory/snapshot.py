"""Snapshots of a learning memory: plain JSON, content-addressed, written atomically.

A snapshot file holds ``{"kind", "digest", "state", ...}`` where ``digest`` is the SHA-256
of the canonical JSON of ``{"kind": kind, "state": state}``: two memories that know the
same thing have the same digest, and a file whose state was edited by hand no longer
matches its digest (refused on read).  A playbook grown by one rule is such a file, read
by a later rule; a stream cell keeps one per batch in its checkpoint folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping

from memtrials.io import atomic_write_json, canonical_json
from memtrials.memory.base import Memory


class SnapshotError(ValueError):
    """A snapshot file that cannot be used (missing, edited, of another memory kind)."""


def digest(kind: str, state: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON of a memory's kind and state."""
    return hashlib.sha256(canonical_json({"kind": kind, "state": state}, indent=None).encode()).hexdigest()


def snapshot(memory: Memory, **meta: Any) -> dict[str, Any]:
    """The snapshot of ``memory`` as data."""
    state = json.loads(canonical_json(memory.state(), indent=None))  # plain JSON, or an error here
    return {"kind": memory.kind, "digest": digest(memory.kind, state), "state": state, **meta}


def write_snapshot(path: str | os.PathLike[str], memory: Memory, **meta: Any) -> dict[str, Any]:
    """Write ``memory``'s snapshot to ``path`` atomically; return it."""
    snap = snapshot(memory, **meta)
    atomic_write_json(path, snap)
    return snap


def read_snapshot(path: str | os.PathLike[str], kind: str | None = None) -> dict[str, Any]:
    """A snapshot file, checked: its digest matches its state, and its kind is ``kind``."""
    p = Path(path)
    try:
        snap = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SnapshotError(f"{p}: memory snapshot not found. Fix: build it (ask Snakemake for this path).") from None
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{p}: not a JSON memory snapshot ({exc}). Fix: delete it and rebuild it.") from None
    if not isinstance(snap, dict) or not {"kind", "digest", "state"} <= set(snap):
        raise SnapshotError(f"{p}: not a memory snapshot (needs kind, digest, state). Fix: delete it and rebuild it.")
    if kind is not None and snap["kind"] != kind:
        raise SnapshotError(f"{p}: a snapshot of a {snap['kind']!r} memory, expected {kind!r}.")
    if digest(snap["kind"], snap["state"]) != snap["digest"]:
        raise SnapshotError(f"{p}: the state does not match its digest (edited by hand?). "
                            "Fix: delete it and rebuild it; snapshots are outputs, not inputs to edit.")
    return snap


def restore(memory: Memory, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load the snapshot at ``path`` into ``memory``; return the snapshot."""
    snap = read_snapshot(path, memory.kind)
    memory.load(snap["state"])
    return snap
