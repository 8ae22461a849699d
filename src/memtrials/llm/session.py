"""Open a model client for one cell from the pipeline config."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any, AsyncIterator, Mapping

from memtrials.config import check_config
from memtrials.llm.cache.backends import open_cache
from memtrials.llm.carry import configure as configure_carry
from memtrials.llm.client import Client
from memtrials.llm.records import Recorder
from memtrials.llm.runs import RUN_ID_ENV, run_id  # noqa: F401  (re-exported)
from memtrials.llm.local.shared import server_dir


def journal_dir(config: Mapping[str, Any]) -> Path:
    """Journals live beside the cache, outside every Snakemake output."""
    return Path(config["cache"]["path"]).parent.parent / "records"


@contextlib.asynccontextmanager
async def open_client(
    config: Mapping[str, Any],
    cell_id: str,
    records_path: str | os.PathLike[str] | None = None,
    *,
    cache_mode: str | None = None,
) -> AsyncIterator[Client]:
    """A client for one cell; on exit the cell's records are written as Parquet.

    ``config`` is the (validated) pipeline config; ``cache_mode`` overrides
    ``config['cache']['mode']`` (``replay``: the cache alone, no endpoint, no key;
    :mod:`memtrials.llm.claimed`).  The records file is written even when the cell fails
    (a budget stop, an error), so what was done is kept.
    """
    endpoints = check_config(config)
    configure_carry(config)  # carry.max_chars: what of a reply later prompts quote (memtrials.llm.carry)
    mode = cache_mode or config["cache"]["mode"]
    replay = mode == "replay"  # reads as mode use; the client makes no fresh call
    cache = open_cache(config["cache"]["path"], "use" if replay else mode, config["cache"]["backend"])
    recorder = Recorder(cell_id, records_path, journal_dir(config))
    server_log = str(journal_dir(config) / f"{cell_id.replace('/', '__')}.server.log")
    client = Client(
        endpoints, cache, recorder, cell_id=cell_id, run_id=run_id(),
        request=config.get("request"), budget=config.get("budget"), server_log=server_log,
        servers={**config["servers"], "dir": str(server_dir(config))} if "servers" in config else None,
        replay=replay,
    )
    try:
        yield client
    finally:
        try:
            await client.aclose()
        finally:
            recorder.write()
            recorder.close()
            cache.close()
