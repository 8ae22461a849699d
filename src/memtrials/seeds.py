"""The one seed rule: every seeded draw of the pipeline derives its seed from named parts by SHA-256.

The parts are written with ``str`` and joined with ``":"`` (the bandit's choices use
``"\\x1f"``), and the UTF-8 bytes are hashed:

- :func:`seed_of`: the first 4 bytes, big-endian, modulo ``2**31 - 1``: the seed of an
  episode, a task order, a selector (the three studies' designs);
- :func:`seed64`: the first 8 bytes, big-endian: the seed of a ``random.Random`` or numpy
  generator of one draw (action listings, history shuffles, bandit choices);
- :func:`order_key`: the hex digest, a sort key for a seeded order without a generator
  (continuation sources, calibrator contexts, training passes).

Every number these give decides tasks, shuffles, prompts and hence model-cache keys: the
rule and every caller's parts (prefixes such as ``hindsight-shuffle`` included) stay as
they are.  A low-level module: it imports nothing from ``memtrials``.
"""

from __future__ import annotations

import hashlib
from typing import Any

__all__ = ["digest", "order_key", "seed64", "seed_of"]

SEED_MOD = 2**31 - 1


def digest(*parts: Any, sep: str = ":") -> bytes:
    """SHA-256 of ``parts`` written with ``str`` and joined by ``sep``."""
    return hashlib.sha256(sep.join(str(p) for p in parts).encode()).digest()


def seed_of(*parts: Any) -> int:
    """A 31-bit seed (in ``[0, 2**31 - 1)``) from named parts, the study seed first."""
    return int.from_bytes(digest(*parts)[:4], "big") % SEED_MOD


def seed64(*parts: Any, sep: str = ":") -> int:
    """A 64-bit seed for a generator from ``parts`` joined by ``sep``."""
    return int.from_bytes(digest(*parts, sep=sep)[:8], "big")


def order_key(*parts: Any) -> str:
    """The hex digest of ``parts``: sorting by it gives a seeded order."""
    return digest(*parts).hex()
