"""The HTTP transport of chat completions: one aiohttp session per endpoint.

The OpenAI SDK's request path (its params transform, request options, and its httpx
connection pool) cost about ten times the CPU of a bare asyncio client per call, enough
to make the client, not the endpoint, the limit at 32 calls in flight
(``benchmarks/bench_llm_throughput.py``).  Chat completions therefore go out here, as
the JSON bytes ``chat.completions.create`` would send (:func:`request_body`), while
failures are raised as the SDK's own exception types with the SDK's own messages
(built by the SDK from the response), so retries, ``Retry-After`` and the ``errors``
of every record are what they were: 429 ``RateLimitError``, 5xx ``InternalServerError``,
other statuses their ``APIStatusError`` subclasses, a timeout ``APITimeoutError``, a
dropped or truncated connection ``APIConnectionError``.

The key lives only in the session's headers, as it lived only in the SDK client.
"""

from __future__ import annotations

import asyncio
import functools
import json
import ssl
from typing import Any, Mapping

import aiohttp
import aiohttp.helpers
import httpx2
import openai
import yarl

_LEADING = ("model", "stream", "service_tier", "messages")


@functools.lru_cache(maxsize=1)
def _ssl_context() -> ssl.SSLContext:
    """Verify TLS against certifi's bundle where installed (as httpx does), else the system's."""
    try:
        import certifi
    except ImportError:
        return ssl.create_default_context()
    return ssl.create_default_context(cafile=certifi.where())


def request_body(model: str, messages: list[dict[str, Any]], params: Mapping[str, Any],
                 extra: Mapping[str, Any]) -> bytes:
    """The JSON body ``chat.completions.create`` would send, byte for byte: its keys in the
    SDK's order (model, stream, service_tier, messages, then the rest alphabetically), then
    ``extra_body``, compact and UTF-8 as the SDK's transport serialises it
    (``tests/test_llm_speed.py`` compares the bytes with the SDK's)."""
    fields = {"model": model, "messages": messages, **params}
    body = {k: fields[k] for k in _LEADING if k in fields}
    body.update((k, fields[k]) for k in sorted(fields) if k not in body)
    body.update(extra)
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")


def _env_proxy(url: str) -> tuple[yarl.URL | None, aiohttp.BasicAuth | None]:
    """The proxy that ``HTTPS_PROXY`` / ``HTTP_PROXY`` / ``NO_PROXY`` name for ``url``, if any."""
    try:
        return aiohttp.helpers.get_env_proxy_for_url(yarl.URL(url))
    except LookupError:  # no proxy for this URL
        return None, None


class ChatTransport:
    """POST ``/chat/completions`` for one endpoint; errors as the SDK raises them."""

    def __init__(self, oai: openai.AsyncOpenAI, base_url: str, key: str, timeout_s: float) -> None:
        self._oai = oai  # builds the status errors, exactly as for its own requests
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._headers = {
            "Authorization": f"Bearer {key}", "Content-Type": "application/json", "Accept": "application/json",
            "User-Agent": f"memtrials (AsyncOpenAI/Python {openai.__version__} compatible)",
        }
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    def _request(self) -> httpx2.Request:
        return httpx2.Request("POST", self._url)

    async def post(self, body: bytes) -> bytes:
        """Send ``body``; the response body of a 2xx reply, else the SDK's exception."""
        return (await self.exchange(body))[0]

    async def exchange(self, body: bytes) -> tuple[bytes, list[tuple[str, str]]]:
        """Send ``body``; the body and headers of a 2xx reply (a router's account of what
        answered is in its headers: :mod:`memtrials.llm.router`), else the SDK's exception."""
        if self._session is None:  # created on first use, inside the running loop
            # as the SDK's client: a proxy from the environment (looked up once here:
            # aiohttp's trust_env looks it up on every request, a third of the CPU per
            # call), certifi's CA bundle; concurrency is bounded by the endpoint's limits
            proxy, proxy_auth = _env_proxy(self._url)
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ssl=_ssl_context()), timeout=self._timeout,
                headers=self._headers, proxy=proxy, proxy_auth=proxy_auth)
        try:
            async with self._session.post(self._url, data=body) as resp:
                data = await resp.read()
                status, headers = resp.status, list(resp.headers.items())
        except asyncio.TimeoutError as exc:
            raise openai.APITimeoutError(request=self._request()) from exc
        except aiohttp.ClientError as exc:
            raise openai.APIConnectionError(request=self._request()) from exc
        if not 200 <= status < 300:
            response = httpx2.Response(status, headers=headers, content=data, request=self._request())
            raise self._oai._make_status_error_from_response(response)
        return data, headers

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
