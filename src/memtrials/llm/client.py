"""The model client: the only way any study talks to a model.

One :class:`Client` serves one cell.  For each request it builds the full parameter set
(endpoint defaults + the caller's overrides), derives the cache key, replays a cached
response or makes the call (through :class:`memtrials.llm.calls.Calls`: bounded in-flight
requests per endpoint, rpm/tpm buckets, retries with exponential backoff and full jitter
honouring ``Retry-After``), records the call, charges the ledger and enforces the cost
caps.  A request already in flight in this client is awaited, not sent twice; one that
another process stored first while this call was out is replaced by that stored reply
(:mod:`memtrials.llm.cache.sqlite`: the first stored reply wins), so concurrent cells that
send the same request record the same reply.

Chat completions go out over :mod:`memtrials.llm.transport` (a bare aiohttp session
sending the SDK's request bytes and raising the SDK's exceptions, at a quarter of the
SDK's CPU per call); embeddings go through the OpenAI SDK (:mod:`memtrials.llm.embed`).
Keys are read from the environment when an endpoint's HTTP client is first needed and
live only inside those client objects: never in records, logs, cache or messages.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Mapping, Sequence

from memtrials.config import Endpoint
from memtrials.llm.cache.keys import cache_key, canonical_json
from memtrials.llm.calls import Calls
from memtrials.llm.claimed import claim, refuse_fresh
from memtrials.llm.router import account, apply, fallback_note, joined
from memtrials.llm.serving import mismatch, reported
from memtrials.llm.structured import choice_schema, gbnf_choice, json_instruction, parse_json_reply, response_format
from memtrials.llm.results import ChatResult, EmbedResult, JSONResult, Usage


def _reply(data: Any) -> dict[str, Any]:
    """The fields of a chat-completion body that a record keeps."""
    from memtrials.llm.retry import Malformed

    try:
        choice = data["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise Malformed("reply has no choices[0].message") from None
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return {
        "text": message.get("content") or "",
        "refusal": message.get("refusal") or "",
        "finish_reason": choice.get("finish_reason") or "",
        "usage": (int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                  int(details.get("cached_tokens") or 0)),
        "fingerprint": data.get("system_fingerprint") or "",
        **reported(data),
    }


class Client(Calls):
    """Async model client for one cell (see module docstring); its endpoints, connections,
    limits and counts are :class:`~memtrials.llm.calls.Calls`'s."""

    # -- calls ---------------------------------------------------------------
    def _params(
        self, ep: Endpoint, sample: int, overrides: Mapping[str, Any]
    ) -> dict[str, Any]:
        params: dict[str, Any] = {k: v for k, v in ep.params.items()}
        for k, v in overrides.items():
            if v is not None:
                params[k] = v
        if "seed" not in overrides or overrides.get("seed") is None:
            if params.get("seed") is not None:
                params["seed"] = int(params["seed"]) + int(sample)
        if ep.extra_body:
            params["extra_body"] = dict(ep.extra_body)
        return params

    async def complete(
        self,
        model: str,
        messages: Sequence[Mapping[str, str]],
        *,
        sample: int = 0,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        seed: int | None = None,
        stop: Sequence[str] | None = None,
        choices: Sequence[str] | None = None,
        purpose: str = "",
        grammar: str | None = None,
    ) -> ChatResult:
        """One chat completion.

        ``sample`` is the explicit sample index (part of the cache key, and added to the
        endpoint's default seed).  ``choices`` constrains the reply to one of the given
        strings where the endpoint supports a grammar (llama.cpp) or JSON-schema enums;
        ``ChatResult.constraint`` says which was used (``grammar``, ``json_enum`` or
        ``none``), so the study can record it.  ``grammar`` is a GBNF grammar of the whole
        reply, for endpoints that take one (:meth:`supports_grammar`; others raise
        ``ValueError``); it excludes ``choices``.
        """
        ep = self.chat_endpoint(model)
        if grammar is not None and (choices or not ep.grammar):
            raise ValueError(f"endpoint {model!r}: a grammar needs an endpoint with `grammar: true` and no choices")
        overrides: dict[str, Any] = {
            "max_tokens": max_tokens, "temperature": temperature, "top_p": top_p, "seed": seed,
            "stop": list(stop) if stop else None,
        }
        constraint = "none"
        if choices:
            if ep.grammar:
                overrides["grammar"] = gbnf_choice(choices)
                constraint = "grammar"
            elif ep.structured_output:
                overrides["response_format"] = response_format(choice_schema(choices), "choice")
                constraint = "json_enum"
        if grammar is not None:
            overrides["grammar"], constraint = grammar, "grammar"
        result = await self._call(ep, list(messages), self._params(ep, sample, overrides), sample, purpose, constraint)
        if constraint == "json_enum":
            value, _ = parse_json_reply(result.text, choice_schema(choices or []))
            if value is not None:
                result = ChatResult(**{**result.__dict__, "text": value["answer"]})
        return result

    async def complete_json(
        self,
        model: str,
        messages: Sequence[Mapping[str, str]],
        schema: Mapping[str, Any],
        *,
        sample: int = 0,
        schema_name: str = "answer",
        max_tokens: int | None = None,
        temperature: float | None = None,
        seed: int | None = None,
        purpose: str = "",
        decoding_schema: Mapping[str, Any] | None = None,
    ) -> JSONResult:
        """A JSON answer validated against ``schema`` (never raises on a bad reply).

        ``decoding_schema``: what a structured-output endpoint is asked to follow instead of
        ``schema`` (a narrower one, e.g. with length bounds so a small model's answer fits
        ``max_tokens``); the reply is still judged by ``schema`` alone."""
        ep = self.chat_endpoint(model)
        msgs = [dict(m) for m in messages]
        overrides: dict[str, Any] = {"max_tokens": max_tokens, "temperature": temperature, "seed": seed}
        if ep.structured_output:
            overrides["response_format"] = response_format(decoding_schema or schema, schema_name)
            constraint = "json_schema"
        else:
            msgs[-1]["content"] = msgs[-1]["content"] + json_instruction(schema)
            constraint = "none"
        chat = await self._call(ep, msgs, self._params(ep, sample, overrides), sample, purpose, constraint)
        value, error = parse_json_reply(chat.text, schema)
        if error is None and chat.finish_reason == "length":
            error = None  # a complete, valid object is valid even if the cap was hit
        return JSONResult(
            value=value, valid=error is None, raw=chat.text, error=error, call_id=chat.call_id,
            structured=ep.structured_output, finish_reason=chat.finish_reason, chat=chat,
        )

    async def embed(
        self, model: str, texts: Sequence[str], *, dimensions: int | None = None, purpose: str = "",
    ) -> EmbedResult:
        """Vectors for ``texts`` from an embedding endpoint (``/v1/embeddings``).

        Each distinct text is one call: cached by endpoint identity + text + the
        dimension/normalisation options, recorded, charged at the entry's
        ``price.input_per_mtok``.  Texts not in the cache go out in requests of the
        entry's ``batch_size``, under the same limits and retries as completions
        (:mod:`memtrials.llm.embed`).
        """
        from memtrials.llm.embed import embed_texts

        return await embed_texts(self, model, texts, dimensions=dimensions, purpose=purpose)

    async def _call(
        self, ep: Endpoint, messages: list[dict[str, Any]], params: dict[str, Any],
        sample: int, purpose: str, constraint: str,
    ) -> ChatResult:
        key = cache_key(ep.identity, messages, params, sample)
        cached = True
        record = self.cache.get(key)
        if record is None:
            pending = self.inflight.get(key)
            if pending is not None:
                record = dict(await asyncio.shield(pending))
            else:
                cached = False
                refuse_fresh(self, ep.name, key, "chat completion", f"{purpose or 'chat'}: "
                             f"{str(messages[-1].get('content', '')) if messages else ''}")
                fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
                self.inflight[key] = fut
                try:
                    claimed = await claim(self, key)
                    if isinstance(claimed, dict):  # another cell made this call meanwhile
                        record, cached = claimed, True
                    else:
                        try:
                            record = await self._fresh(ep, key, messages, params, sample, purpose, constraint)
                        except BaseException:
                            self.cache.release(key, self.owner)
                            raise
                    fut.set_result(record)
                except BaseException as exc:
                    fut.set_exception(exc)
                    fut.exception()  # mark retrieved
                    raise
                finally:
                    self.inflight.pop(key, None)
        record = {**record, "cell_id": self.cell_id}
        self.recorder.add(record)
        self.serving_warnings.note(ep.name, record.get("serving_mismatch") or "", ep.source)
        if cached:
            self.cache_hits += 1
        self.progress.add(record["prompt_tokens"] + record["completion_tokens"], record["cost"], cached)
        return ChatResult(
            text=record["response_text"], finish_reason=record["finish_reason"], call_id=record["call_id"],
            usage=Usage(record["prompt_tokens"], record["completion_tokens"], record["cached_tokens"]),
            cost=record["cost"], latency_s=record["latency_s"], attempts=record["attempts"], cached=cached,
            constraint=record["constraint"], refusal=record.get("refusal", ""), record=record,
        )

    async def _fresh(
        self, ep: Endpoint, key: str, messages: list[dict[str, Any]], params: dict[str, Any],
        sample: int, purpose: str, constraint: str,
    ) -> dict[str, Any]:
        from memtrials.llm.retry import now
        from memtrials.llm.transport import request_body

        await self.connect(ep)
        transport = self.transport(ep.name)
        body: dict[str, Any] = {k: v for k, v in params.items() if k not in ("grammar", "extra_body")}
        extra = dict(params.get("extra_body") or {})
        if "grammar" in params:
            extra["grammar"] = params["grammar"]
        est_tokens = sum(len(str(m.get("content", ""))) for m in messages) // 4 + int(params.get("max_tokens", 0))

        payload = request_body(ep.model, messages, body, extra)

        async def send() -> tuple[dict[str, Any], dict[str, str]]:
            # the SDK's bytes and error types over a bare aiohttp session, parsed as plain
            # JSON: a tenth of the SDK's CPU per call (memtrials.llm.transport); a
            # malformed body is retried
            data, headers = await transport.exchange(payload)
            return _reply(json.loads(data)), account(headers)

        (reply, kept), latency, attempt, errors, started_at = await self.send(ep, est_tokens, send)
        reply = apply(reply, kept)
        prompt_tokens, completion_tokens, cached_tokens = reply["usage"]
        record = {
            "call_id": key[:24],
            "cell_id": self.cell_id,
            "origin_cell": self.cell_id,
            "endpoint": ep.name,
            "model": ep.served_alias,  # a trained checkpoint's carries its digest
            "request_digest": key,
            "sample": int(sample),
            "purpose": purpose,
            "messages": canonical_json(messages),
            "params": canonical_json(params),
            "constraint": constraint,
            "response_text": reply["text"],
            "refusal": reply["refusal"],
            "finish_reason": reply["finish_reason"],
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "cached_tokens": cached_tokens,
            "cost": ep.price.cost(prompt_tokens, completion_tokens, cached_tokens),
            "latency_s": round(latency, 6),
            "attempts": attempt,
            "errors": json.dumps(errors),
            "seed": params.get("seed"),
            "system_fingerprint": reply["fingerprint"],
            "started_at": started_at,
            "finished_at": now(),
            "reported_model": reply["reported_model"],
            "reported_provider": reply["reported_provider"],
            "billed_cost": reply["billed_cost"],
            "serving_mismatch": joined(mismatch(ep, reply["reported_model"], reply["reported_provider"]),
                                       fallback_note(kept)),
            **({"router": reply["router"]} if "router" in reply else {}),
        }
        # the first stored reply wins: if another cell (process) committed this key while
        # this call was out, go on with its reply so both cells and every rerun agree
        stored = self.cache.store(key, record, self.run_id)
        self.fresh_calls += 1
        return stored
