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

from memtrials.lazy import lazy_names

_WHERE = {
    "BACKENDS": "backends", "check_backend_for_executor": "backends", "open_cache": "backends",
    "Cache": "sqlite", "NETWORK_FILESYSTEMS": "sqlite", "filesystem_type": "sqlite",
    "ShardCache": "shards",
    "cache_key": "keys", "canonical_json": "keys", "embed_key": "keys",
}

__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE)
