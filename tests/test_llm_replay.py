"""Replay mode (``cache.mode: replay``): a reviewer with the response cache alone, no key and
no endpoint, replays every call; a call the cache does not hold fails naming the cell and
the missing entry, and nothing is sent."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from memtrials.config import ConfigError, check_config
from memtrials.llm import open_client
from memtrials.llm.check import preflight
from memtrials.llm.claimed import ReplayMiss
from memtrials.llm.token_count import count_tokens
from memtrials.testing import loopback_embed_endpoint

KEY = "MEMTRIALS_REPLAY_UNIT_KEY"


def _calls(cfg: dict, cell: str, records: Path, question: str = "Capital of France?") -> tuple:
    async def run():
        async with open_client(cfg, cell, records) as client:
            chat = await client.complete("loop", [{"role": "user", "content": question}], purpose="answer")
            vec = await client.embed("emb", ["a lesson", "another lesson"])
            counts = await count_tokens(client, "loop", ["one two three"])
            return chat.text, vec.vectors.tolist(), counts, client.fresh_calls, client.cache_hits

    return asyncio.run(run())


def test_a_cached_cell_replays_with_no_endpoint_and_no_key_and_a_missing_entry_names_the_cell(
        loopback, make_config, tmp_path, monkeypatch):
    srv = loopback(policy={"script": ["Paris"]})
    monkeypatch.setenv(KEY, "a-key")
    cfg = make_config(srv, api_key_env=KEY)
    models = Path(cfg["models_file"])
    entries = yaml.safe_load(models.read_text())["endpoints"]
    entries["emb"] = loopback_embed_endpoint(srv, api_key_env=KEY)
    models.write_text(yaml.safe_dump({"endpoints": entries}))
    first = _calls(cfg, "study/cell", tmp_path / "first.parquet")
    assert first[3] == 4 and srv.stats.requests > 0

    srv.stop()  # the endpoint is gone, and so is its key
    monkeypatch.delenv(KEY)
    use = copy.deepcopy(cfg)
    with pytest.raises(ConfigError, match=f"{KEY}, which is not set"):
        preflight(use, check_config(use), ["loop", "emb"])
    replay = copy.deepcopy(cfg)
    replay["cache"]["mode"] = "replay"
    preflight(replay, check_config(replay), ["loop", "emb"])  # nothing to check: no key, no server
    again = _calls(replay, "study/cell", tmp_path / "again.parquet")
    assert again[:3] == first[:3] and again[3] == 0 and again[4] == 4
    assert pq.read_table(tmp_path / "again.parquet") == pq.read_table(tmp_path / "first.parquet")

    # a call the cache does not hold: refused before any connection, naming cell, endpoint and entry
    with pytest.raises(ReplayMiss) as err:
        _calls(replay, "study/other-cell", tmp_path / "miss.parquet", question="Capital of Italy?")
    text = str(err.value)
    assert "replay mode (cache.mode: replay): cell 'study/other-cell' needs a chat completion on endpoint 'loop'" in text
    assert "missing entry " in text and "answer: Capital of Italy?" in text and cfg["cache"]["path"] in text
    assert "Fix: " in text

    async def embed_miss():
        async with open_client(replay, "study/embed-cell") as client:
            await client.embed("emb", ["a lesson", "a lesson never embedded"])

    with pytest.raises(ReplayMiss, match="cell 'study/embed-cell' needs an embedding on endpoint 'emb'.*'a lesson never embedded'"):
        asyncio.run(embed_miss())
