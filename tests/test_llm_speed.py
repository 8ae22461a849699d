"""The client's fast request path puts on the wire exactly what the SDK's
``chat.completions.create`` would: the same bytes, the same headers."""

from __future__ import annotations

import asyncio

import openai
import pytest

from hindsight.llm import open_client

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
            from hindsight.llm.structured import choice_schema, response_format

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
        assert h1 == h2
