"""Lesson token counts by the endpoint's own tokenizer (``POST /tokenize``), cached, with
the declared ``pieces`` counter as the fallback of an endpoint that has none."""

from __future__ import annotations

import asyncio

import pytest

from memtrials.llm import open_client, read_records
from memtrials.memory.ace import piece_tokens
from memtrials.studies.playbook.design import lesson_tokens
from tests.conftest import embedded_config

TEXTS = ["Read the app's API documentation first.", "Check names, then call: apis.x.y(z=1).",
         "Read the app's API documentation first.", "antidisestablishmentarianism"]


def _count(cfg, cell: str, calls, name: str = "endpoint", model: str = "loop"):
    async def go():
        async with open_client(cfg, cell, calls) as client:
            return await lesson_tokens(client, name, model, TEXTS)
    return asyncio.run(go())


def test_endpoint_counts_are_the_servers_cached_and_recorded(loopback, make_config, tmp_path):
    srv = loopback()
    cfg = make_config(srv)
    counts, by = _count(cfg, "t/a", tmp_path / "a.parquet")
    assert by == "endpoint:loop" and counts == {t: len(t.split()) for t in TEXTS}  # the loopback's words
    assert counts != {t: piece_tokens(t) for t in TEXTS}  # not the declared fallback
    assert srv.stats.tokenize_requests == 3  # one call per distinct text
    rec = read_records(tmp_path / "a.parquet").to_pandas()
    assert list(rec["purpose"]) == ["lesson_tokens"] * 3 and set(rec["constraint"]) == {"tokenize"}
    again, _ = _count(cfg, "t/b", tmp_path / "b.parquet")  # another job on the same cache: replayed
    assert again == counts and srv.stats.tokenize_requests == 3
    pieces, by = _count(cfg, "t/c", tmp_path / "c.parquet", name="pieces")
    assert by == "pieces" and pieces == {t: piece_tokens(t) for t in TEXTS} and srv.stats.tokenize_requests == 3


def test_an_endpoint_without_a_tokenizer_falls_back_to_pieces(loopback, make_config, tmp_path):
    srv = loopback(tokenize=False)
    counts, by = _count(make_config(srv), "t/a", tmp_path / "a.parquet")
    assert counts == {t: piece_tokens(t) for t in TEXTS} and by == "pieces (endpoint loop exposes no /tokenize)"
    assert srv.stats.tokenize_requests == 0


@pytest.mark.slow
@pytest.mark.embedded
def test_the_embedded_models_own_tokenizer(tmp_path):
    cfg = embedded_config(tmp_path)
    counts, by = _count(cfg, "t/a", tmp_path / "a.parquet", model="smollm2")
    assert by == "endpoint:smollm2" and all(isinstance(n, int) and n > 0 for n in counts.values())
    assert counts["antidisestablishmentarianism"] > piece_tokens("antidisestablishmentarianism")  # sub-word pieces
    again, _ = _count(cfg, "t/b", tmp_path / "b.parquet", model="smollm2")
    assert again == counts
    assert len(read_records(tmp_path / "b.parquet")) == 3
