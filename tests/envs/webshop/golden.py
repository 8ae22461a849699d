"""Readers of the golden files recorded from upstream WebShop (tests/data/webshop/, see PROVENANCE.md)."""

from __future__ import annotations

import functools
import json
import lzma
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[2] / "data" / "webshop"


@functools.lru_cache(maxsize=None)
def golden(name: str) -> tuple[dict, ...]:
    """The records of ``tests/data/webshop/<name>.jsonl.xz``."""
    with lzma.open(GOLDEN / f"{name}.jsonl.xz", "rt", encoding="utf-8") as fh:
        return tuple(json.loads(line) for line in fh if line.strip())
