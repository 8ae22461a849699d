"""The response cache and spending ledger: replies stored under their request's key.

Public face::

    cache = open_cache(config["cache"]["path"], mode, backend)   # Cache or ShardCache
    key = cache_key(endpoint.identity, messages, params, sample)

Backends: :mod:`memtrials.llm.cache.sqlite` (one machine), :mod:`memtrials.llm.cache.shards`
(several hosts over a network filesystem); choosing one: :mod:`memtrials.llm.cache.backends`;
the keys: :mod:`memtrials.llm.cache.keys`.  Names are imported on first use, so that
importing this package (or one of its modules) loads no backend it does not need.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "BACKENDS": "backends", "check_backend_for_executor": "backends", "open_cache": "backends",
    "Cache": "sqlite", "NETWORK_FILESYSTEMS": "sqlite", "filesystem_type": "sqlite",
    "ShardCache": "shards",
    "cache_key": "keys", "canonical_json": "keys", "embed_key": "keys",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:  # (``from memtrials.llm.cache import claims`` imports the submodule)
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_WHERE))
