"""Choosing the cache's backend (``cache.backend``): opening a cache, and refusing the
``sqlite`` backend where jobs run on other hosts.

``sqlite`` (:class:`memtrials.llm.cache.sqlite.Cache`) serves jobs on one machine;
``shards`` (:class:`memtrials.llm.cache.shards.ShardCache`, same methods) serves jobs on
different hosts over a network filesystem, where SQLite's WAL is not safe.
"""

from __future__ import annotations

import os
from typing import Any

from memtrials.llm.cache.sqlite import Cache

BACKENDS = ("sqlite", "shards")


def check_backend_for_executor(backend: str, executor: str | None, non_local: bool) -> None:
    """Refuse the ``sqlite`` backend when Snakemake sends jobs to other hosts.

    The cluster profiles select ``shards`` through their ``config:`` entry, but a
    ``--config`` on the command line replaces that entry whole, so a run can reach a
    cluster executor with ``cache.backend: sqlite``; this check (run at the workflow's
    start, before any job) stops it with the fix instead of letting jobs on several hosts
    share one SQLite file.
    """
    if backend == "sqlite" and non_local:
        raise ValueError(
            f"cache.backend = sqlite, but the executor {executor!r} runs jobs on other hosts, where one SQLite "
            f"file is not safe. Fix: add cache={{backend: shards}} to your --config (a --config on the command "
            f"line replaces the profile's config: entry, which sets it), or put cache: {{backend: shards}} in "
            f"a --configfile overlay."
        )


def open_cache(path: str | os.PathLike[str], mode: str = "use", backend: str = "sqlite") -> Any:
    """The response cache at ``path`` (``cache.path``) with the configured backend: a
    :class:`~memtrials.llm.cache.sqlite.Cache` (``sqlite``) or a
    :class:`~memtrials.llm.cache.shards.ShardCache` (``shards``: ``shards/`` and ``claims/``
    beside ``path``)."""
    if backend == "sqlite":
        return Cache(path, mode)
    if backend == "shards":
        from memtrials.llm.cache.shards import ShardCache

        return ShardCache(path, mode)
    raise ValueError(f"cache.backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
