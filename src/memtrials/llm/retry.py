"""Requests with retries: the one loop every model call goes through.

A request waits for a slot of its endpoint (``max_concurrency``) and its rpm/tpm buckets,
checks the cost caps, and is retried on 429, 5xx, timeouts, dropped connections and
malformed bodies, with exponential backoff and full jitter honouring ``Retry-After``.
Chat completions and embeddings both use :func:`send_with_retries`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import random
import time
from typing import Awaitable, Callable, TypeVar

import openai

from memtrials.config import Endpoint
from memtrials.llm.hints import explain, server_message
from memtrials.llm.limits import EndpointLimits
from memtrials.llm.results import CallFailed

log = logging.getLogger("memtrials.llm")
T = TypeVar("T")

RETRYABLE = (
    openai.RateLimitError,
    openai.InternalServerError,
    openai.APITimeoutError,
    openai.APIConnectionError,
    openai.APIResponseValidationError,
    json.JSONDecodeError,
)


def now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _explain(ep: Endpoint, exc: openai.APIStatusError) -> tuple[str, str]:
    message = server_message(exc.body, str(exc))
    return message, explain(exc.status_code, message, name=ep.name, source=ep.source, model=ep.model,
                            key_env=ep.api_key_env, base_url=ep.base_url)


def refused(ep: Endpoint, exc: openai.APIStatusError) -> CallFailed:
    """The error of a request the endpoint refused: the server's own message and what it means
    (:mod:`memtrials.llm.hints`: a router's 400 about a key, its 401 about its upstream key, an
    unknown model)."""
    message, hint = _explain(ep, exc)
    return CallFailed(f"{ep.name} ({ep.source}): the endpoint refused the request with HTTP {exc.status_code}: "
                      f'"{message}". {hint}'.rstrip())


def final_5xx(ep: Endpoint, exc: openai.APIStatusError) -> bool:
    """Whether a 5xx reply names a key or model fault (a router wrapping its provider's refusal)."""
    return _explain(ep, exc)[1].startswith(("The router at", "The server does not serve model")) \
        and exc.status_code != 503


class Malformed(Exception):
    """A 200 reply whose body lacks what the call must have (retried)."""


async def send_with_retries(
    ep: Endpoint, est_tokens: int, send: Callable[[], Awaitable[T]], *, limits: EndpointLimits,
    check_budget: Callable[[Endpoint], None], max_retries: int, backoff_base_s: float, backoff_max_s: float,
    refuse: Callable[[openai.APIStatusError], Exception | None] | None = None,
) -> tuple[T, float, int, list[str], str]:
    """One request under the endpoint's ``limits`` and the cost caps (``check_budget``,
    raising once a cap is reached), with up to ``max_retries`` retries.

    ``send()`` makes the HTTP request and parses its body (raise :class:`Malformed`
    for a body worth retrying).  429, 5xx, timeouts, dropped connections and
    malformed bodies are retried with exponential backoff (``backoff_base_s`` doubling,
    at most ``backoff_max_s``) and full jitter, honouring ``Retry-After``; ``refuse`` may
    turn an HTTP error into a specific, final error.  Returns the parsed reply, latency,
    attempts, the errors met and the start time.
    """
    errors: list[str] = []
    started_at = now()
    for attempt in range(1, max_retries + 2):
        try:
            async with limits.semaphore:
                # checked once a slot is free, so at most max_concurrency calls overshoot
                check_budget(ep)
                await limits.admit(est_tokens)
                t0 = time.monotonic()
                reply = await send()
                latency = time.monotonic() - t0
            return reply, latency, attempt, errors, started_at
        except Exception as exc:
            if refuse is not None and isinstance(exc, openai.APIStatusError):
                final = refuse(exc)
                if final is not None:
                    raise final from None
            if isinstance(exc, openai.InternalServerError) and final_5xx(ep, exc):
                raise refused(ep, exc) from None  # a router's 5xx for a wrong key or model: no retry helps
            if isinstance(exc, (*RETRYABLE, Malformed)):
                errors.append(f"attempt {attempt}: {type(exc).__name__}: {str(exc)[:200]}")
                if attempt > max_retries:
                    raise CallFailed(
                        f"{ep.name} ({ep.source}): call failed after {attempt} attempts; last error: "
                        f"{type(exc).__name__}: {str(exc)[:300]}. Check that the endpoint is up "
                        f"(python -m memtrials models check {ep.name}); completed calls are cached."
                    ) from None
                delay = retry_after(exc)
                if delay is None:
                    delay = random.uniform(0, min(backoff_max_s, backoff_base_s * 2 ** (attempt - 1)))
                log.debug("%s: retry %d in %.2f s after %s", ep.name, attempt, delay, type(exc).__name__)
                await asyncio.sleep(delay)
                continue
            if isinstance(exc, openai.APIStatusError):
                raise refused(ep, exc) from None
            raise
    raise AssertionError("unreachable")  # the loop returns or raises

