"""Embeddings through the model layer: ``Client.embed`` over ``/v1/embeddings``.

An embedding *call* is one text: it has its own cache entry (key: endpoint identity +
text + dimension/normalisation options, :func:`memtrials.llm.cache.keys.embed_key`), its own
record (``purpose`` as given, default ``embed``; ``constraint`` ``embedding``;
``messages`` the JSON list ``[text]``; ``params`` the options; ``response_text`` the
vector as a JSON list; prompt tokens the text's share of the request's usage) and its
own ledger row.  Texts that miss the cache are claimed across processes as chat calls are
(:func:`memtrials.llm.claimed.pay_once`: one paid call per text, the other jobs wait for its
stored reply); the claimed ones go out in requests of the entry's ``batch_size`` through
:func:`memtrials.llm.retry.send_with_retries` (limits, cost caps, retries), and a text
already in flight in this client is awaited, not sent twice.  First-stored-wins
(:mod:`memtrials.llm.cache.sqlite`) stays as the backstop.

An endpoint that does not serve ``/v1/embeddings`` (HTTP 404, 405 or 501, or a 200 body
without ``data[i].embedding``) fails at once with :class:`~memtrials.llm.results.CallFailed`
naming the endpoint, its registry file and what to point it at instead.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from memtrials.config import Endpoint
from memtrials.llm.cache.keys import canonical_json, embed_key
from memtrials.llm.claimed import pay_once, refuse_fresh
from memtrials.llm.router import account, apply, fallback_note, joined, router_of
from memtrials.llm.serving import mismatch, reported
from memtrials.llm.results import CallFailed, EmbedResult, Usage

if TYPE_CHECKING:
    from memtrials.llm.calls import Calls

NO_EMBEDDINGS_STATUS = (404, 405, 501)


def _fix(ep: Endpoint) -> str:
    return (f"Fix: point '{ep.name}' in {ep.source} at a server that serves /v1/embeddings for "
            f"'{ep.model}' (vLLM with an embedding model, llama.cpp's server with --embeddings, "
            f"OpenAI's embedding models), or set roles.embedder to the embedded embedder (minilm).")


def no_embeddings(ep: Endpoint, why: str) -> CallFailed:
    """The error for an endpoint that does not serve embeddings."""
    where = f"{(ep.base_url or 'the embedded server').rstrip('/')}/embeddings"
    return CallFailed(f"{ep.name} ({ep.source}): POST {where} {why}: this endpoint does not serve "
                      f"/v1/embeddings for model '{ep.model}'. {_fix(ep)}")


def embed_options(ep: Endpoint, dimensions: int | None) -> dict[str, Any]:
    """What besides the text determines a vector: requested dimensions, client-side normalisation."""
    options: dict[str, Any] = {}
    dim = dimensions if dimensions is not None else ep.params.get("dimensions")
    if dim is not None:
        options["dimensions"] = int(dim)
    if ep.params.get("normalize"):
        options["normalize"] = True
    return options


def parse_embeddings(ep: Endpoint, data: Any, n: int) -> tuple[list[list[float]], int, str, dict[str, Any]]:
    """Vectors (in input order), prompt tokens, fingerprint and the serving fields
    (:func:`memtrials.llm.serving.reported`) from an embeddings body."""
    try:
        items = sorted(data["data"], key=lambda d: int(d.get("index", 0)))
        vectors = [item["embedding"] for item in items]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise no_embeddings(ep, "answered 200 with a body without data[i].embedding") from None
    if len(vectors) != n:
        raise no_embeddings(ep, f"answered {len(vectors)} embeddings for {n} inputs")
    out: list[list[float]] = []
    for v in vectors:
        if isinstance(v, str):  # encoding_format base64: little-endian float32
            v = np.frombuffer(base64.b64decode(v), dtype="<f4").tolist()
        if not isinstance(v, list) or not v or not all(isinstance(x, (int, float)) for x in v):
            raise no_embeddings(ep, "answered an embedding that is not a list of numbers")
        out.append([float(x) for x in v])
    if len({len(v) for v in out}) > 1:
        raise no_embeddings(ep, "answered vectors of different lengths")
    usage = data.get("usage") or {}
    tokens = int(usage.get("prompt_tokens") or usage.get("total_tokens") or 0)
    return out, tokens, str(data.get("system_fingerprint") or ""), reported(data)


def token_shares(texts: Sequence[str], total: int) -> list[int]:
    """Split a request's prompt tokens over its texts by length (largest remainder);
    a body without usage is estimated at a token per 4 characters."""
    if total <= 0:
        return [max(1, len(t) // 4) for t in texts]
    weights = [max(1, len(t)) for t in texts]
    raw = [total * w / sum(weights) for w in weights]
    shares = [int(r) for r in raw]
    for i in sorted(range(len(raw)), key=lambda i: raw[i] - shares[i], reverse=True)[: total - sum(shares)]:
        shares[i] += 1
    return shares


async def _request(client: "Calls", ep: Endpoint, batch: list[tuple[str, str]], options: Mapping[str, Any],
                   purpose: str) -> list[tuple[str, dict[str, Any]]]:
    """One ``/v1/embeddings`` request for ``batch`` (key, text); its records, cached."""
    import openai  # here, not at import: a fully cached cell never needs the SDK (about 1.3 CPU-s)

    from memtrials.llm.retry import now

    oai = await client.connect(ep)
    texts = [t for _, t in batch]
    body: dict[str, Any] = {"model": ep.model, "input": texts, "encoding_format": "float"}
    if "dimensions" in options:
        body["dimensions"] = options["dimensions"]

    async def send() -> tuple[list[list[float]], int, str, dict[str, Any]]:
        raw = await oai.embeddings.with_raw_response.create(**body, extra_body=dict(ep.extra_body) or None)
        vectors, tokens, fingerprint, serving = parse_embeddings(ep, json.loads(raw.content), len(texts))
        return vectors, tokens, fingerprint, apply(serving, account(raw.headers.items()))

    def refuse(exc: openai.APIStatusError) -> Exception | None:
        if exc.status_code in NO_EMBEDDINGS_STATUS:
            return no_embeddings(ep, f"answered HTTP {exc.status_code} ({str(exc)[:160]})")
        return None

    est = sum(len(t) for t in texts) // 4 + 1
    (vectors, tokens, fingerprint, serving), latency, attempts, errors, started_at = \
        await client.send(ep, est, send, refuse)
    off = joined(mismatch(ep, serving["reported_model"], serving["reported_provider"]),
                 fallback_note(router_of(serving)))
    billed = serving["billed_cost"]
    if "dimensions" in options and len(vectors[0]) != options["dimensions"]:
        raise CallFailed(f"{ep.name} ({ep.source}): asked for {options['dimensions']} dimensions, the endpoint "
                         f"answered {len(vectors[0])}. Fix: drop 'dimensions' or use a model that supports it.")
    finished_at = now()
    records = []
    shares = token_shares(texts, tokens)
    for (key, text), vec, share in zip(batch, vectors, shares):
        if options.get("normalize"):
            norm = float(np.linalg.norm(vec)) or 1.0
            vec = [x / norm for x in vec]
        records.append((key, {
            "call_id": key[:24], "cell_id": client.cell_id, "origin_cell": client.cell_id, "endpoint": ep.name,
            "model": ep.model, "request_digest": key, "sample": 0, "purpose": purpose or "embed",
            "messages": canonical_json([text]), "params": canonical_json({"task": "embed", **options}),
            "constraint": "embedding", "response_text": json.dumps(vec), "refusal": "", "finish_reason": "",
            "prompt_tokens": share, "completion_tokens": 0, "cached_tokens": 0,
            "cost": ep.price.cost(share, 0), "latency_s": round(latency, 6), "attempts": attempts,
            "errors": json.dumps(errors), "seed": None, "system_fingerprint": fingerprint,
            "started_at": started_at, "finished_at": finished_at,
            "reported_model": serving["reported_model"], "reported_provider": serving["reported_provider"],
            # a request's billed cost, split over its texts like its tokens
            "billed_cost": None if billed is None else billed * share / max(1, sum(shares)),
            "serving_mismatch": off,
            **({"router": serving["router"]} if "router" in serving else {}),
        }))
    stored = client.cache.store_many(records, client.run_id)
    client.fresh_calls += len(records)
    return [(key, stored[key]) for key, _ in records]


async def embed_texts(client: "Calls", model: str, texts: Sequence[str], *, dimensions: int | None = None,
                      purpose: str = "") -> EmbedResult:
    """See :meth:`memtrials.llm.client.Client.embed`."""
    ep = client.endpoint(model)
    if ep.task != "embed" and ep.provider != "openai":
        raise CallFailed(f"{ep.name} ({ep.source}): the embedded chat model serves no /v1/embeddings. "
                         f"{_fix(ep)}")
    texts = list(texts)
    bad = [i for i, t in enumerate(texts) if not isinstance(t, str)]
    if bad:
        raise TypeError(f"embed: texts must be strings (item {bad[0]} is {type(texts[bad[0]]).__name__})")
    options = embed_options(ep, dimensions)
    keys = [embed_key(ep.identity, t, options) for t in texts]
    distinct = dict(zip(keys, texts))
    records = client.cache.get_many(list(distinct))
    cached = {k: True for k in records}
    waiting = {k: client.inflight[k] for k in distinct if k not in records and k in client.inflight}
    missing = [(k, t) for k, t in distinct.items() if k not in records and k not in waiting]
    for key, text in missing[:1]:
        refuse_fresh(client, ep.name, key, "embedding", text)
    loop = asyncio.get_running_loop()
    for key, _ in missing:
        client.inflight[key] = loop.create_future()
    try:
        got = await pay_once(client, missing, ep.batch_size, lambda b: _request(client, ep, b, options, purpose))
    except BaseException as exc:  # failed or cancelled: this process's waiters learn it too
        for key, _ in missing:
            fut = client.inflight.pop(key, None)
            if fut is not None and not fut.done():
                if isinstance(exc, asyncio.CancelledError):
                    fut.cancel()
                else:
                    fut.set_exception(exc)
                    fut.exception()  # mark retrieved: a waiter may not exist
        raise
    for key, (record, other) in got.items():
        records[key], cached[key] = record, other
        client.inflight.pop(key).set_result(record)
    for key, fut in waiting.items():
        records[key] = dict(await asyncio.shield(fut))
        cached[key] = True
    return _result(client, ep, keys, records, cached)


def _result(client: "Calls", ep: Endpoint, keys: list[str], records: dict[str, dict[str, Any]],
            cached: dict[str, bool]) -> EmbedResult:
    prompt_tokens, cost = 0, 0.0
    for key in dict.fromkeys(keys):
        record = {**records[key], "cell_id": client.cell_id}
        client.recorder.add(record)
        client.serving_warnings.note(ep.name, record.get("serving_mismatch") or "", ep.source)
        if cached[key]:
            client.cache_hits += 1
        else:
            prompt_tokens += int(record["prompt_tokens"])
            cost += float(record["cost"])
        client.progress.add(int(record["prompt_tokens"]), float(record["cost"]), cached[key])
    vectors = np.array([json.loads(records[k]["response_text"]) for k in keys], dtype=np.float32)
    return EmbedResult(
        vectors=vectors if keys else np.zeros((0, 0), np.float32), call_ids=[records[k]["call_id"] for k in keys],
        cached=[cached[k] for k in keys], usage=Usage(prompt_tokens, 0, 0), cost=cost, model=ep.name,
        records=[records[k] for k in dict.fromkeys(keys)],
    )
