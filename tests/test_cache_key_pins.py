"""The cache keys are pinned: a fixed set of requests, sent through the real client, must
derive the very keys that were recorded (as literal SHA-256 digests) from the code before the
package was re-laid out and renamed.  A key that changes would make every cached call of an
earlier run a fresh, paid call, and a rerun would no longer replay its records; if this
test fails, the change altered what a request's key covers (or its bytes), not only code.

The client runs for real (parameter merging, constrained choices, JSON schemas, the seed
per sample index, embeddings' options); only the cache is a stand-in that records each key it
is asked for and answers with a canned record, so no server is needed and no call is made.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml

from memtrials.config import load_models
from memtrials.llm.cache import cache_key, embed_key
from memtrials.llm.client import Client
from memtrials.llm.records import Recorder

REPO = Path(__file__).resolve().parents[1]

SCHEMA = {
    "type": "object",
    "properties": {"first_tool": {"type": "string", "enum": ["zorvex", "malqin"]}, "reason": {"type": "string"}},
    "required": ["first_tool", "reason"],
    "additionalProperties": False,
}
NARROW = {**SCHEMA, "properties": {**SCHEMA["properties"], "reason": {"type": "string", "maxLength": 40}}}
MESSAGES = [
    {"role": "system", "content": "You are an agent in a text world. Answer with one action."},
    {"role": "user", "content": "Task: put a clean mug on the desk.\nAdmissible actions: go north, take mug, café ☕"},
]


class KeyCapture:
    """A cache that answers every key with a canned record and remembers the keys asked."""

    def __init__(self) -> None:
        self.keys: list[str] = []

    @staticmethod
    def _record(key: str, text: str) -> dict[str, Any]:
        return {"call_id": key[:24], "request_digest": key, "response_text": text, "finish_reason": "stop",
                "prompt_tokens": 1, "completion_tokens": 1, "cached_tokens": 0, "cost": 0.0, "latency_s": 0.0,
                "attempts": 1, "constraint": "none", "refusal": "", "serving_mismatch": ""}

    def get(self, key: str) -> dict[str, Any]:
        self.keys.append(key)
        return self._record(key, '{"first_tool": "zorvex", "reason": "r", "answer": "take mug"}')

    def get_many(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        self.keys.extend(keys)
        return {k: self._record(k, "[0.6, 0.8]") for k in keys}

    def close(self) -> None:
        pass


def _endpoints(tmp_path: Path) -> dict[str, Any]:
    shipped = yaml.safe_load((REPO / "config" / "models.yaml").read_text())["endpoints"]
    remote = {"provider": "openai", "base_url": "http://127.0.0.1:8000/v1/", "model": "remote-chat",
              "max_concurrency": 4, "params": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 64, "seed": 0},
              "structured_output": True, "price": {"input_per_mtok": 0.0, "output_per_mtok": 0.0}}
    registry = {"endpoints": {
        "smollm2": shipped["smollm2"],
        "remote": remote,
        "plain": {**remote, "model": "plain-chat", "structured_output": False,
                  "params": {"temperature": 0.7, "max_tokens": 32}},
        "routed": {**remote, "model": "vendor/model", "extra_body": {"provider": {"order": ["A"],
                                                                                 "allow_fallbacks": False}}},
        "vectors": {"provider": "openai", "task": "embed", "base_url": "http://127.0.0.1:8001/v1",
                    "model": "text-embed", "max_concurrency": 4, "batch_size": 8,
                    "params": {"dimensions": 2, "normalize": True},
                    "price": {"input_per_mtok": 0.0, "output_per_mtok": 0.0}},
    }}
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(registry))
    return load_models(path)


async def _requests(client: Client) -> None:
    await client.complete("remote", MESSAGES)
    await client.complete("remote", MESSAGES, sample=3)
    await client.complete("remote", MESSAGES, sample=2, temperature=0.8, top_p=0.95, max_tokens=12, stop=["\n"])
    await client.complete("remote", MESSAGES, choices=["go north", "take mug"])
    await client.complete("smollm2", MESSAGES, choices=["go north", "take mug"], sample=1)
    await client.complete("smollm2", MESSAGES, seed=7)
    await client.complete_json("remote", MESSAGES, SCHEMA, schema_name="tools")
    await client.complete_json("remote", MESSAGES, SCHEMA, decoding_schema=NARROW, sample=5)
    await client.complete_json("plain", MESSAGES, SCHEMA, sample=1)
    await client.complete_json("smollm2", MESSAGES, SCHEMA, max_tokens=100)
    await client.complete("routed", MESSAGES, sample=4)
    await client.embed("vectors", ["a lesson about mugs", "café ☕", "a lesson about mugs"])
    await client.embed("vectors", ["a lesson about mugs"], dimensions=3)


# Recorded from the client before the re-layout (commit 0229578, package `memtrials`).
PINNED = [
    "5f9a15f729f6aa70607fe59755400473fd5ab1591697a9136e2636865523f8de",  # chat, sample 0
    "53000af254604f252199c38444fdc41af6c92d63968f5a9faa4f1db2c594a1d0",  # chat, sample 3 (seed 3)
    "05da1d80b71bdc4b68b3e2a1befdb613ca87e1348f7570b991a203a0ffdef352",  # overrides, stop
    "e8da32c7aca3138ae309dd7022a0be7e3ee06483a90df3ada85dca54527feaac",  # choices as a JSON enum
    "9d18b97314c83d21fe9bab8b76290a4e959b20facfbf8dc7611d817087ecc59d",  # choices as a GBNF grammar (embedded)
    "920b3b4fc0a4b008b494290cad773e0217dda89f1a303cb74b727a6943f1fd08",  # an explicit seed
    "8748758925a1a79b8344aceb6f5adf0eeb260836ccdf61299a4ac5d563669976",  # JSON schema
    "0cbd12744452d11fb984c03afaeb1bb0316a305aa63bf3ec6cf59d8bee984071",  # decoding schema, sample 5
    "11e6d6e4048bccbf0fb4676c8e0c9e619a63b71ffcb3200978c4b3c5befaab31",  # schema in the prompt (no structured output)
    "9cf7c2f708a0cf863aa13122acd2b86a75bf172bb2bc07ac02dd7ec690dd0f0c",  # JSON schema, embedded
    "7bfbd205fba65546cce3db4a94a2ef23550ff3e274a7c76a867a601d3df95c98",  # extra_body (a pinned provider)
    "1a45c53b2b74ab255ab2800043aa03ba74194627c8d9637eefe24ec0fef2e1cc",  # embedding, text 1
    "95c0d7380ad37b8613747ac0c0567d729e07654b7c9dd3c9ba3e4c55c1f9e78f",  # embedding, text 2
    "b9d61b006d12eced6372cc621ded3cc482aec3250155945630adb069419a032f",  # embedding, other dimensions
]

RAW_PINNED = {
    "chat": "a7e12b107c233ec3288d90bed51c25db93801d340a0711b14bf6881225ae1b2e",
    "embed": "7fc281febbed9c79958cf93e72155d94dae178f9881c440801e1640231f662ee",
}


def test_the_clients_keys_are_the_pinned_digests(tmp_path):
    capture = KeyCapture()
    client = Client(_endpoints(tmp_path), capture, Recorder("pins/cell", None, tmp_path / "records"),
                    cell_id="pins/cell", run_id="pins")
    asyncio.run(_requests(client))
    assert capture.keys == PINNED


def test_the_key_functions_are_pinned():
    identity = {"base_url": "http://127.0.0.1:8000/v1", "model": "remote-chat"}
    params = {"temperature": 0.0, "max_tokens": 8, "seed": 2, "response_format": {"type": "json_schema"}}
    assert cache_key(identity, MESSAGES, params, 2) == RAW_PINNED["chat"]
    assert embed_key(identity, "café ☕", {"dimensions": 2, "normalize": True}) == RAW_PINNED["embed"]


@pytest.mark.parametrize("sample", [0, 1])
def test_the_sample_index_is_in_the_key(sample):
    identity = {"embedded": "b179c952", "model": "m"}
    keys = {cache_key(identity, MESSAGES, {"seed": 0}, s) for s in (sample, sample + 1)}
    assert len(keys) == 2


# A planted endpoint (provider planted, issue 38): its identity is the policy path, its params and
# the SHA-256 of the policy module's source, here a fixed module written by the test (new pins,
# recorded when the provider was added; the params change the key).
PLANTED_SOURCE = "def make(p_right=0.5):\n    return lambda body: 'take mug'\n"
PLANTED_PINNED = {
    "0.5": "e676a78cf7b2c6dbae103f0a8c3164668d1366edbff3dcd1a152d2e46933891e",
    "0.9": "818ae1c3eab193b7febcc7a1109d8c98da57002f08a36c5c82dc79f54449b879",
}


def _planted(tmp_path: Path, monkeypatch, p_right: float) -> Any:
    pkg = tmp_path / "pinpkg"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "planted_pin.py").write_text(PLANTED_SOURCE)
    monkeypatch.syspath_prepend(str(tmp_path))
    entry = {"provider": "planted", "model": "planted-pin",
             "planted": {"policy": "pinpkg.planted_pin:make", "params": {"p_right": p_right}},
             "max_concurrency": 4, "params": {"temperature": 1.0, "max_tokens": 16, "seed": 0},
             "structured_output": True, "price": {"input_per_mtok": 0.0, "output_per_mtok": 0.0}}
    path = tmp_path / f"planted-{p_right}.yaml"
    path.write_text(yaml.safe_dump({"endpoints": {"planted": entry}}))
    return load_models(path)


@pytest.mark.parametrize("p_right", [0.5, 0.9])
def test_a_planted_endpoints_keys_are_pinned(tmp_path, monkeypatch, p_right):
    capture = KeyCapture()
    client = Client(_planted(tmp_path, monkeypatch, p_right), capture,
                    Recorder("pins/cell", None, tmp_path / "records"), cell_id="pins/cell", run_id="pins")
    asyncio.run(client.complete("planted", MESSAGES, choices=["go north", "take mug"], sample=1))
    assert capture.keys == [PLANTED_PINNED[str(p_right)]]
