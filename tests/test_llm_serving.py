"""The serving contract (issue 13): every record keeps the model the endpoint reported,
the provider a router named and the billed cost it reported, and marks a reply that the
registry did not expect; a registry entry may send no sampling parameters at all."""

from __future__ import annotations

import asyncio
import json
import logging

import pandas as pd
import pyarrow.parquet as pq
import pytest

from memtrials.config import load_models, parse_models
from memtrials.llm import open_client
from memtrials.llm.records import FIELDS
from memtrials.llm.serving import mismatch
from memtrials.studies.luck.freeze import FreezeMismatch
from memtrials.studies.luck.lock import check_sent
from memtrials.testing import loopback_endpoint
from tests.conftest import REPO

MSGS = [{"role": "user", "content": "Question. Admissible actions: go north, take apple"}]


def _calls(cfg, records, n=3, name="loop"):
    async def go():
        async with open_client(cfg, "test/serving", records) as client:
            return [await client.complete(name, MSGS, sample=i) for i in range(n)]
    asyncio.run(go())
    return pq.read_table(records).to_pandas()


def test_an_entry_without_sampling_parameters_sends_none(loopback, make_config, tmp_path):
    srv = loopback(keep_requests=True)
    cfg = make_config(srv, params={})
    _calls(cfg, tmp_path / "calls.parquet", n=2)
    bodies = [json.loads(b) for path, _, b in srv.received if path.endswith("/chat/completions")]
    assert len(bodies) == 2
    for body in bodies:
        assert not {"temperature", "top_p", "seed", "max_tokens"} & set(body), body


def test_the_luck_preset_sends_no_sampling_parameters():
    models = load_models(REPO / "config/presets/luck-paper.models.yaml")
    remote = [m for m in models.values() if m.provider not in ("embedded", "planted")]  # the 11 of the panel
    assert len(remote) == 11
    for m in remote:
        assert set(m.params) <= {"max_tokens"}, (m.name, dict(m.params))


def test_a_matching_reply_is_recorded_with_an_empty_mismatch(loopback, make_config, tmp_path):
    srv = loopback()
    table = _calls(make_config(srv), tmp_path / "calls.parquet")
    assert {"reported_model", "reported_provider", "billed_cost", "serving_mismatch"} <= set(FIELDS)
    assert (table["reported_model"] == srv.model).all()
    assert (table["serving_mismatch"] == "").all() and (table["reported_provider"] == "").all()
    assert table["billed_cost"].isna().all()


def test_a_substituted_model_and_provider_are_visible_per_call_and_warned_once(loopback, make_config, tmp_path,
                                                                               caplog):
    srv = loopback(serve_as={"model": "org/cheaper-model", "provider": "Elsewhere", "cost": 0.0025})
    cfg = make_config(srv, extra_body={"provider": {"order": ["Pinned"], "allow_fallbacks": False}},
                      price=(1.0, 2.0))
    with caplog.at_level(logging.WARNING, logger="memtrials.llm"):
        table = _calls(cfg, tmp_path / "calls.parquet", n=4)
    assert (table["reported_model"] == "org/cheaper-model").all()
    assert (table["reported_provider"] == "Elsewhere").all()
    assert table["billed_cost"].tolist() == [0.0025] * 4          # beside the price-based estimate
    assert (table["cost"] > 0).all() and (table["cost"] != 0.0025).all()
    text = table["serving_mismatch"].iloc[0]
    assert "'org/cheaper-model'" in text and "'Elsewhere'" in text and "'Pinned'" in text
    warned = [r for r in caplog.records if "serving_mismatch" in r.getMessage()]
    assert len(warned) == 1 and "endpoint 'loop'" in warned[0].getMessage()


def test_accepted_ids_and_providers_come_from_the_serving_key(tmp_path):
    base = {"provider": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "org/m", "max_concurrency": 1,
            "params": {}, "structured_output": False, "price": {"input_per_mtok": 0.0, "output_per_mtok": 0.0}}
    eps = parse_models({"endpoints": {
        "plain": base,
        "pinned": {**base, "extra_body": {"provider": {"order": ["A", "B"], "allow_fallbacks": False}}},
        "loose": {**base, "extra_body": {"provider": {"order": ["A"]}}},          # fallbacks allowed
        "declared": {**base, "serving": {"models": ["org/m", "org/m-2026-01-01"], "providers": ["C"]}},
    }})
    assert mismatch(eps["plain"], "org/m", "anyone") == ""
    assert mismatch(eps["plain"], "", "") == ""                      # nothing reported: nothing to compare
    assert "org/m-x" in mismatch(eps["plain"], "org/m-x", "")
    assert mismatch(eps["pinned"], "org/m", "b") == ""                # provider names compare case-blind
    assert "'C'" in mismatch(eps["pinned"], "org/m", "C")
    assert mismatch(eps["loose"], "org/m", "Z") == ""
    assert mismatch(eps["declared"], "org/m-2026-01-01", "C") == ""
    assert mismatch(eps["declared"], "org/m", "A") != ""


def test_embedding_records_keep_the_serving_fields(loopback, tmp_path):
    from tests.test_embeddings import _config, _embed

    srv = loopback(serve_as={"model": "other-embedder", "cost": 0.001})
    cfg = _config(tmp_path, srv, batch_size=2)
    _embed(cfg, "test/embed", ["alpha beta", "gamma", "delta epsilon zeta"], records=tmp_path / "calls.parquet")
    t = pq.read_table(tmp_path / "calls.parquet").to_pandas()
    assert (t["reported_model"] == "other-embedder").all() and t["serving_mismatch"].str.contains("other").all()
    # each request's billed cost is split over its texts: two requests of 0.001 each
    assert t["billed_cost"].sum() == pytest.approx(0.002)


def _luck_calls(mismatch_text: str) -> pd.DataFrame:
    return pd.DataFrame([{"call_id": "c1", "params": json.dumps({"max_tokens": 32}), "model": "org/m",
                          "serving_mismatch": mismatch_text}])


def test_a_registered_run_refuses_a_call_served_otherwise_and_an_unregistered_one_warns(caplog):
    endpoint = {"identity": {"model": "org/m"}, "sent": {"reader": {"params": {"max_tokens": 32}, "extra_body": {}}}}
    check_sent(_luck_calls(""), "answers.calls.parquet", endpoint, "reader")
    with pytest.raises(FreezeMismatch, match="served otherwise.*reported model 'org/x'"):
        check_sent(_luck_calls("reported model 'org/x', registry expects 'org/m'"), "answers.calls.parquet",
                   endpoint, "reader")
    with caplog.at_level(logging.WARNING, logger="memtrials.llm"):
        check_sent(_luck_calls("reported model 'org/x', registry expects 'org/m'"), "answers.calls.parquet",
                   endpoint, "reader", registered_run=False)
    assert any("not a registered run" in r.getMessage() for r in caplog.records)


def test_an_embedded_entry_is_not_a_mismatch_for_llama_cpps_placeholder_model():
    models = load_models(REPO / "config/models.yaml")
    assert mismatch(models["smollm2"], "-", "") == ""
