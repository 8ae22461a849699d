"""The client's fast request path (:mod:`memtrials.llm.transport`) puts on the wire the
body the SDK's ``chat.completions.create`` would, byte for byte, and fails with the SDK's
exception types and messages, so retries and records are unchanged."""

from __future__ import annotations

import asyncio

import openai
import pytest

from memtrials.llm import open_client
from memtrials.llm.retry import retry_after
from memtrials.llm.transport import ChatTransport, request_body
from memtrials.testing import FAULT_KINDS, Faults

MSGS = [{"role": "system", "content": "You act."}, {"role": "user", "content": 'héllo "q" \\ \u2028 \U0001F600'}]


@pytest.mark.parametrize("grammar", [False, True])
def test_requests_are_byte_identical_to_the_sdks(loopback, make_config, grammar):
    srv = loopback(keep_requests=True)
    extra_body = {"cache_prompt": True, "top_k": 40}
    cfg = make_config(srv, grammar=grammar, extra_body=extra_body)

    async def ours() -> None:
        async with open_client(cfg, "speed/ours") as client:
            await client.complete("loop", MSGS, stop=["\n"], max_tokens=7)
            await client.complete("loop", MSGS, choices=["go north", "take apple"], sample=2)

    async def sdks() -> None:
        oai = openai.AsyncOpenAI(base_url=srv.base_url, api_key="loopback-test-key", max_retries=0,
                                 timeout=cfg["request"]["timeout_s"])
        params = {"temperature": 0.0, "top_p": 1.0, "max_tokens": 64, "seed": 0}
        await oai.chat.completions.with_raw_response.create(
            model=srv.model, messages=MSGS, extra_body=extra_body, **{**params, "max_tokens": 7, "stop": ["\n"]})
        if grammar:
            choice = {"extra_body": {**extra_body, "grammar": 'root ::= "go north" | "take apple"'}}
        else:
            from memtrials.llm.structured import choice_schema, response_format

            choice = {"extra_body": extra_body,
                      "response_format": response_format(choice_schema(["go north", "take apple"]), "choice")}
        await oai.chat.completions.with_raw_response.create(
            model=srv.model, messages=MSGS, **{**params, "seed": 2}, **choice)
        await oai.close()

    asyncio.run(ours())
    mine = list(srv.received)
    srv.received.clear()
    asyncio.run(sdks())
    theirs = list(srv.received)
    assert len(mine) == len(theirs) == 2
    for (p1, h1, b1), (p2, h2, b2) in zip(mine, theirs):
        assert p1 == p2 == "/v1/chat/completions"
        assert b1 == b2, (b1, b2)
        for header in ("authorization", "content-type", "accept", "content-length"):
            assert h1[header] == h2[header], header


@pytest.mark.parametrize("kind", [k for k in FAULT_KINDS] + ["not_found"])
def test_failures_raise_the_sdks_exceptions_with_the_sdks_messages(loopback, kind):
    faults = Faults(**({kind: 1.0} if kind != "not_found" else {}), timeout_delay_s=1.0, retry_after_s=0.25)
    srv = loopback(faults=faults)
    base = srv.base_url + ("/nowhere" if kind == "not_found" else "")

    async def both() -> tuple[object, object]:
        oai = openai.AsyncOpenAI(base_url=base, api_key="k", max_retries=0, timeout=0.5)
        transport = ChatTransport(oai, base, "k", 0.5)
        body = request_body(srv.model, MSGS, {"max_tokens": 4}, {})
        outcomes = []
        for send in (lambda: transport.post(body),
                     lambda: oai.chat.completions.with_raw_response.create(model=srv.model, messages=MSGS, max_tokens=4)):
            try:
                outcomes.append(await send())
            except openai.OpenAIError as exc:
                outcomes.append(exc)
        await transport.close()
        await oai.close()
        return outcomes[0], outcomes[1]

    ours, sdks = asyncio.run(both())
    if kind == "rate_malformed":  # a 200 with a bad body: both return it, json.loads fails (retried)
        assert ours == sdks.content
        return
    assert type(ours) is type(sdks) and str(ours) == str(sdks), (ours, sdks)
    if kind == "rate_429":
        assert retry_after(ours) == retry_after(sdks) == 0.25


def test_the_proxy_comes_from_the_environment_once(monkeypatch):
    from memtrials.llm.transport import _env_proxy

    for name in ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy", "ALL_PROXY",
                 "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    assert _env_proxy("https://api.example.com/v1/chat/completions") == (None, None)
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")
    proxy, auth = _env_proxy("https://api.example.com/v1/chat/completions")
    assert str(proxy) == "http://proxy.internal:3128" and auth.login == "user"
    assert _env_proxy("http://127.0.0.1:8080/v1/chat/completions") == (None, None)
