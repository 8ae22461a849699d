"""Behind a router: what its replies say is kept and read.

Refusals (recorded router replies played by the loopback server) are explained by their
own text: a 400 whose text says the key is wrong is about the key, a 401 about the router's
upstream key is not about the user's key, an unknown model is named; ``models check``
quotes the server's message.  A router's ``x-litellm-*`` headers are recorded with each
call (model, base URL, fallbacks, cost), a fallback is flagged, and a reported cost fills
``billed_cost`` where the body has none; calls without such headers record what they
recorded before, byte for byte.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from memtrials.config import load_models
from memtrials.llm import CallFailed, open_client
from memtrials.llm.check import check_endpoint
from memtrials.llm.records import RECORD_SCHEMA, read_records
from memtrials.llm.router import reported_spend
from memtrials.testing import loopback_embed_endpoint
from memtrials.testing.router import (OWN_KEY_400, UNKNOWN_MODEL_400, UNKNOWN_MODEL_404, UPSTREAM_KEY_401,
                                      UPSTREAM_KEY_500, litellm_headers)

KEY = "MEMTRIALS_ROUTER_TEST_KEY"
ASK = [{"role": "user", "content": "Say OK."}]


def _one(cfg: dict, records: Path | None = None, cell: str = "test/router"):
    async def run():
        async with open_client(cfg, cell, records) as client:
            return await client.complete("loop", ASK)

    return asyncio.run(run())


@pytest.mark.parametrize("reply, says, cause", [
    (OWN_KEY_400, "Invalid proxy server token passed", f"The server refused the key in ${KEY} (HTTP 400)"),
    (UPSTREAM_KEY_401, "Incorrect API key provided", "the key the ROUTER holds for that provider"),
    (UPSTREAM_KEY_500, "The api_key client option must be set", "the key the ROUTER holds for that provider"),
    (UNKNOWN_MODEL_400, "Invalid model name passed in model=no-such-model", "does not serve model 'loopback-model'"),
    (UNKNOWN_MODEL_404, "does not exist or you do not have access", "does not serve model 'loopback-model'"),
])
def test_a_refusal_names_its_real_cause_from_the_servers_own_words(loopback, make_config, monkeypatch,
                                                                     reply, says, cause):
    srv = loopback(router={"refuse": reply})
    monkeypatch.setenv(KEY, "sk-mine")
    cfg = make_config(srv, api_key_env=KEY)
    with pytest.raises(CallFailed) as err:
        _one(cfg)
    text = str(err.value)
    assert f'HTTP {reply[0]}: "' in text and says in text and cause in text, text
    assert "Fix: " in text
    if "ROUTER holds" in cause:
        assert f"your key in ${KEY} was accepted" in text and "check the key in" not in text
    if "does not serve" in cause:
        assert "GET " + srv.base_url + "/models" in text and "key" not in text.split("HTTP")[0]
    assert srv.stats.requests == 1  # none of these is retried (the upstream key's 500 neither)


def _registry(tmp_path: Path, srv) -> dict:
    entry = {"provider": "openai", "base_url": srv.base_url, "model": srv.model, "api_key_env": KEY,
             "max_concurrency": 1, "params": {"max_tokens": 1}, "structured_output": False,
             "price": {"input_per_mtok": 0.0, "output_per_mtok": 0.0}}
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"endpoints": {"routed": entry}}))
    return load_models(path)


@pytest.mark.parametrize("router, says, cause", [
    ({"refuse": OWN_KEY_400, "refuse_models": True}, "Invalid proxy server token passed", "refused the key in"),
    ({"refuse": UPSTREAM_KEY_401}, "Incorrect API key provided", "the key the ROUTER holds"),
    ({"refuse": UNKNOWN_MODEL_400}, "Invalid model name passed in model=no-such-model", "does not serve model"),
])
def test_models_check_quotes_the_servers_message(loopback, tmp_path, monkeypatch, router, says, cause):
    srv = loopback(router=router)
    monkeypatch.setenv(KEY, "sk-mine")
    result = check_endpoint(_registry(tmp_path, srv)["routed"], timeout=5)
    assert not result.ok
    assert 'the server says: "' in result.detail and says in result.detail and cause in result.detail, result.detail


def test_router_headers_are_recorded_a_fallback_is_flagged_and_a_reported_cost_is_kept(
        loopback, make_config, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY, "sk-mine")
    # the router names the requested model in the body; its headers say a fallback answered
    headers = litellm_headers("openai/other-model", "http://10.0.0.7:8080/v1", fallbacks=1, cost=0.00042)
    srv = loopback(router={"headers": headers})
    cfg = make_config(srv, api_key_env=KEY)
    models = Path(cfg["models_file"])
    entries = yaml.safe_load(models.read_text())["endpoints"]
    entries["emb"] = loopback_embed_endpoint(srv, api_key_env=KEY)
    models.write_text(yaml.safe_dump({"endpoints": entries}))
    records = tmp_path / "calls.parquet"

    async def run():
        async with open_client(cfg, "test/routed", records) as client:
            chat = await client.complete("loop", ASK)
            vec = await client.embed("emb", ["one text", "two texts"])
            return chat, vec

    chat, vec = asyncio.run(run())
    record = chat.record
    assert json.loads(record["router"]) == headers
    assert record["reported_model"] == "openai/other-model"  # the header's, not the body's echo
    assert record["billed_cost"] == pytest.approx(0.00042)  # the body had no usage.cost
    assert "reported model 'openai/other-model'" in record["serving_mismatch"]
    assert "the router fell back (x-litellm-attempted-fallbacks: 1); answered by openai/other-model at " \
           "http://10.0.0.7:8080/v1" in record["serving_mismatch"]
    assert all(json.loads(r["router"])["x-litellm-model-api-base"] == "http://10.0.0.7:8080/v1" for r in vec.records)
    assert sum(r["billed_cost"] for r in vec.records) == pytest.approx(0.00042)  # one request, split over its texts
    table = read_records(records)
    assert table.schema.names[-1] == "router" and table.num_rows == 3
    assert reported_spend(table.to_pylist()) == [("emb", 2, pytest.approx(0.00042)), ("loop", 1, pytest.approx(0.00042))]

    # no fallback, and the deployment named with its provider's prefix: no mismatch
    srv.router["headers"] = litellm_headers(f"openai/{srv.model}", "http://10.0.0.7:8080/v1")

    async def plain():
        async with open_client(cfg, "test/routed-plain") as client:
            return await client.complete("loop", [{"role": "user", "content": "Another question."}])

    assert asyncio.run(plain()).record["serving_mismatch"] == ""


def test_calls_without_router_headers_record_what_they_did_before(loopback, make_config, tmp_path):
    srv = loopback()
    cfg = make_config(srv)
    first, again = tmp_path / "first.parquet", tmp_path / "again.parquet"
    result = _one(cfg, first)
    assert "router" not in result.record  # nor in its cache entry
    assert pq.read_schema(first).names == RECORD_SCHEMA.names  # the schema of before
    _one(cfg, again)
    assert first.read_bytes() == again.read_bytes() and srv.stats.completions == 1
