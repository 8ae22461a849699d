"""Token counts by an endpoint's own tokenizer: ``POST /tokenize`` at the server's root.

llama.cpp's server (the embedded model) answers ``{"content": text}`` with ``{"tokens":
[...]}``; vLLM answers ``{"model": ..., "prompt": text}`` with ``{"count": n, "tokens":
[...]}``.  The request carries both forms and asks for no special tokens (``add_special``,
``add_special_tokens``), so a count is the text's own.  Each distinct text is one call:
cached by endpoint identity + text (a rerun replays it, so counts are deterministic) and
claimed across processes as chat calls are (:func:`memtrials.llm.claimed.pay_once`: two jobs
counting the same text send it once), recorded (``purpose`` as given, ``constraint`` ``tokenize``, ``response_text`` the count,
no tokens billed).  An endpoint without the route (HTTP 404, 405 or 501: OpenAI's API, a
router) has no tokenizer: :func:`count_tokens` returns ``None`` and the caller falls back
to its declared one.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from typing import TYPE_CHECKING, Any, Sequence

from memtrials.llm.cache.keys import canonical_json
from memtrials.llm.claimed import pay_once, refuse_fresh
from memtrials.llm.results import CallFailed

if TYPE_CHECKING:
    import aiohttp

    from memtrials.llm.calls import Calls

NO_TOKENIZER_STATUS = (404, 405, 501)
ATTEMPTS = 4


def tokenize_key(identity: Any, text: str) -> str:
    """The cache key of one text's count on one endpoint."""
    return hashlib.sha256(canonical_json({"kind": "tokenize", "endpoint": identity, "text": text}).encode()).hexdigest()


def _count(data: Any) -> int:
    if isinstance(data, dict) and isinstance(data.get("count"), int):
        return int(data["count"])
    if isinstance(data, dict) and isinstance(data.get("tokens"), list):
        return len(data["tokens"])
    raise ValueError("no count or tokens list in the reply")


async def _post(session: aiohttp.ClientSession, url: str, body: dict[str, Any], timeout_s: float) -> int | None:
    """One text's count, ``None`` when the server has no ``/tokenize``; transient errors retried."""
    import aiohttp

    last = ""
    for attempt in range(ATTEMPTS):
        try:
            async with session.post(url, json=body, timeout=aiohttp.ClientTimeout(total=timeout_s)) as resp:
                if resp.status in NO_TOKENIZER_STATUS:
                    return None
                text = await resp.text()
                if resp.status == 200:
                    return _count(json.loads(text))
                last = f"HTTP {resp.status}: {text[:160]}"
                if resp.status < 500 and resp.status != 429:
                    break
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        await asyncio.sleep(min(2.0, 0.1 * 2**attempt))
    raise CallFailed(f"POST {url} failed ({last}). Fix: check that the endpoint's server is up, or declare the "
                     "word-and-punctuation tokenizer (the study's tokenizer: pieces).")


class _NoTokenizer(Exception):
    """The endpoint answers no ``/tokenize`` (its claims are given back)."""


async def _fresh(client: "Calls", ep: Any, batch: list[tuple[str, str]], purpose: str) -> list[tuple[str, dict[str, Any]]]:
    """Count the texts of ``batch`` (key, text), claimed by this cell; their stored records."""
    import aiohttp  # aiohttp and the SDK (through retry) only now: a fully cached count needs neither

    from memtrials.llm.retry import now

    oai = await client.connect(ep)  # starts an embedded server
    root = str(oai.base_url).rstrip("/").removesuffix("/v1")
    headers = {"Authorization": f"Bearer {oai.api_key}"} if oai.api_key else {}
    fresh = []
    async with aiohttp.ClientSession(headers=headers) as session:
        for key, text in batch:
            body = {"content": text, "prompt": text, "model": ep.model, "add_special": False,
                    "add_special_tokens": False}
            started, t0 = now(), time.monotonic()
            n = await _post(session, root + "/tokenize", body, client.timeout_s)
            if n is None:
                raise _NoTokenizer
            fresh.append((key, {
                "call_id": key[:24], "cell_id": client.cell_id, "origin_cell": client.cell_id,
                "endpoint": ep.name, "model": ep.model, "request_digest": key, "sample": 0, "purpose": purpose,
                "messages": canonical_json([text]), "params": canonical_json({"task": "tokenize"}),
                "constraint": "tokenize", "response_text": json.dumps(n), "refusal": "", "finish_reason": "",
                "prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0, "cost": 0.0,
                "latency_s": round(time.monotonic() - t0, 6), "attempts": 1, "errors": "[]", "seed": None,
                "system_fingerprint": "", "started_at": started, "finished_at": now(), "reported_model": "",
                "reported_provider": "", "billed_cost": None, "serving_mismatch": "",
            }))
    stored = client.cache.store_many(fresh, client.run_id)
    client.fresh_calls += len(fresh)
    return [(key, stored[key]) for key, _ in fresh]


async def count_tokens(client: "Calls", model: str, texts: Sequence[str], *,
                       purpose: str = "tokenize") -> list[int] | None:
    """Each text's token count by ``model``'s own tokenizer, or ``None`` if it exposes none."""
    ep = client.endpoint(model)
    texts = [str(t) for t in texts]
    keys = [tokenize_key(ep.identity, t) for t in texts]
    distinct = dict(zip(keys, texts))
    records = client.cache.get_many(list(distinct))
    cached = {k: True for k in records}
    missing = [(k, t) for k, t in distinct.items() if k not in records]
    for key, text in missing[:1]:
        refuse_fresh(client, ep.name, key, "token count", text)
    if missing:
        try:
            got = await pay_once(client, missing, len(missing), lambda batch: _fresh(client, ep, batch, purpose))
        except _NoTokenizer:
            return None
        for key, (record, other) in got.items():
            records[key], cached[key] = record, other
    for key in distinct:
        client.recorder.add({**records[key], "cell_id": client.cell_id})
        if cached[key]:
            client.cache_hits += 1
    return [int(json.loads(records[k]["response_text"])) for k in keys]
