"""Check endpoints before any study call.

``preflight`` (run by the workflow's ``onstart``) fails fast on what a run would trip
over later: an unset key variable, missing or corrupt embedded weights (the GGUF of a
chat model, the model.zip of the embedded embedder), an endpoint that does not answer
``/v1/models``.  ``check_endpoint`` (the ``models check`` command) also makes a one-token
completion, or for an embedding endpoint (``task: embed``) one tiny ``/v1/embeddings``
call, and reports its latency (and the vectors' dimension).
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from memtrials.config import ConfigError, Endpoint
from memtrials.llm.local.embedded import weights_paths
from memtrials.llm.local.embedder import server_for
from memtrials.llm.results import CallFailed


@dataclass
class CheckResult:
    name: str
    ok: bool
    detail: str
    latency_s: float | None = None

    def line(self) -> str:
        lat = f"{self.latency_s * 1000:7.0f} ms" if self.latency_s is not None else "       -  "
        return f"{'OK  ' if self.ok else 'FAIL'} {self.name:<24} {lat}  {self.detail}"


def _list_models(ep: Endpoint, base_url: str, key: str, timeout: float) -> None:
    import httpx  # here, like the SDK below: the pipeline's start (preflight) on embedded endpoints needs neither

    url = base_url.rstrip("/") + "/models"
    try:
        resp = httpx.get(url, headers={"Authorization": f"Bearer {key}"}, timeout=timeout)
    except httpx.HTTPError as exc:
        raise ConfigError(
            f"{ep.source}: endpoint '{ep.name}': {url} is unreachable ({type(exc).__name__}). "
            f"Fix: correct base_url or start the server."
        ) from None
    if resp.status_code in (401, 403):
        raise ConfigError(
            f"{ep.source}: endpoint '{ep.name}': the server rejected the key in ${ep.api_key_env} "
            f"(HTTP {resp.status_code}). Fix: export a valid key."
        )
    if resp.status_code != 200:
        raise ConfigError(
            f"{ep.source}: endpoint '{ep.name}': GET {url} answered HTTP {resp.status_code}. "
            f"Fix: check base_url (it usually ends in /v1)."
        )


def preflight(config: Mapping[str, Any], endpoints: Mapping[str, Endpoint], names: Iterable[str],
              timeout: float = 10.0) -> None:
    """Raise :class:`ConfigError` on the first endpoint a run could not use."""
    for name in dict.fromkeys(names):
        ep = endpoints[name]
        if ep.provider == "planted":
            from memtrials.llm.local.planted import build_policy

            build_policy(ep)  # its factory imports and takes its params
            continue
        if ep.provider == "embedded":
            assert ep.embedded is not None
            if ep.embedded.checkpoint:
                continue  # a checkpoint a rule of this run trains: its server checks it on start
            weights_paths(ep.embedded)
            missing = [m for m in ("tokenizers", "safetensors") if ep.task == "embed" and not importlib.util.find_spec(m)]
            if missing:
                raise ConfigError(f"{ep.source}: endpoint '{ep.name}' (the embedded embedder) needs the package(s) "
                                  f"{', '.join(missing)}. Fix: run bin/setup (envs/requirements.txt lists them).")
        else:
            key = ep.api_key()
            _list_models(ep, ep.base_url or "", key, timeout)


async def _one_embedding(base_url: str, key: str, ep: Endpoint, timeout: float) -> tuple[int, float]:
    import openai

    from memtrials.llm.embed import NO_EMBEDDINGS_STATUS, embed_options, no_embeddings, parse_embeddings

    client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=timeout)
    body: dict[str, Any] = {"model": ep.model, "input": ["Say OK."], "encoding_format": "float"}
    if "dimensions" in embed_options(ep, None):
        body["dimensions"] = embed_options(ep, None)["dimensions"]
    try:
        t0 = time.monotonic()
        try:
            raw = await client.embeddings.with_raw_response.create(**body, extra_body=dict(ep.extra_body) or None)
        except openai.APIStatusError as exc:
            if exc.status_code in NO_EMBEDDINGS_STATUS:
                raise no_embeddings(ep, f"answered HTTP {exc.status_code}") from None
            raise
        latency = time.monotonic() - t0
        vectors, _, _, _ = parse_embeddings(ep, raw.http_response.json(), 1)
        return len(vectors[0]), latency
    finally:
        await client.close()


async def _one_token(base_url: str, key: str, ep: Endpoint, timeout: float) -> float:
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=timeout)
    try:
        t0 = time.monotonic()
        await client.chat.completions.create(
            model=ep.model, messages=[{"role": "user", "content": "Say OK."}], max_tokens=1,
            temperature=0.0, extra_body=dict(ep.extra_body) or None,
        )
        return time.monotonic() - t0
    finally:
        await client.close()


def check_endpoint(ep: Endpoint, timeout: float = 30.0) -> CheckResult:
    """Key variable set, ``/v1/models`` answers, a 1-token completion (or 1-text embedding) works."""
    import openai

    server = None
    try:
        if ep.provider == "embedded":
            server = server_for(ep)
            base_url, key = server.start(), "EMPTY"
            what = "embedded server healthy"
        elif ep.provider == "planted":
            from memtrials.llm.local.planted import PlantedServer

            server = PlantedServer(ep)
            base_url, key = server.start(), "EMPTY"
            what = "planted loopback server"
        else:
            base_url, key = ep.base_url or "", ep.api_key()
            what = f"{base_url}"
        _list_models(ep, base_url, key, timeout)
        if ep.task == "embed":
            dim, latency = asyncio.run(_one_embedding(base_url, key, ep, timeout))
            return CheckResult(ep.name, True, f"{what}; 1-text embedding of {ep.model} ok, {dim} dimensions", latency)
        latency = asyncio.run(_one_token(base_url, key, ep, timeout))
        return CheckResult(ep.name, True, f"{what}; 1-token completion of {ep.model} ok", latency)
    except (ConfigError, CallFailed) as exc:
        return CheckResult(ep.name, False, str(exc))
    except openai.APIStatusError as exc:
        return CheckResult(ep.name, False, f"1-request check refused: HTTP {exc.status_code} {str(exc)[:200]}")
    except (openai.APIConnectionError, openai.APITimeoutError) as exc:
        return CheckResult(ep.name, False, f"1-request check failed: {type(exc).__name__}")
    except RuntimeError as exc:
        return CheckResult(ep.name, False, str(exc))
    finally:
        if server is not None:
            server.stop()
