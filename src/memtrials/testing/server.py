"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests, with fault injection.

It speaks HTTP/1.1 (keep-alive) on asyncio streams, written here so that every fault can
be produced exactly: ``/v1/chat/completions`` (usage, ``system_fingerprint``),
``/v1/embeddings`` (deterministic unit vectors from a hash of each text, ``embed_dim``
dimensions or the request's ``dimensions``; off with ``embeddings=False``, which answers
404 as a chat-only server does), ``POST /tokenize`` (llama.cpp's form: ``{"tokens": [...]}``,
one token per whitespace-separated word; off with ``tokenize=False``), ``/v1/models`` and
``/health``; ``/_stats`` returns its counters.  Chat replies come from a scripted policy (:mod:`memtrials.testing.policies`).

Faults (:class:`Faults`) are decided per request from a seeded hash of the request body
and how many times that body was seen before, so a run's fault pattern does not depend
on the order in which concurrent requests arrive, and a retried request is not doomed
to fail again.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Mapping

from memtrials.testing.policies import Policy, make_policy
from memtrials.testing.prefix import common_prefix, whole_words

FAULT_KINDS = ("rate_429", "rate_500", "rate_503", "rate_drop", "rate_timeout", "rate_malformed", "rate_truncated")
FINGERPRINT = "fp_memtrials_loopback"


@dataclass
class Faults:
    """Probabilities of each fault per request, plus latencies (seconds)."""

    rate_429: float = 0.0
    rate_500: float = 0.0
    rate_503: float = 0.0
    rate_drop: float = 0.0
    rate_timeout: float = 0.0
    rate_malformed: float = 0.0
    rate_truncated: float = 0.0
    retry_after_s: float = 0.05
    timeout_delay_s: float = 5.0
    latency_s: float = 0.0
    seed: int = 0

    @classmethod
    def uniform(cls, total: float, **kw: Any) -> "Faults":
        """``total`` split equally over every fault kind."""
        share = total / len(FAULT_KINDS)
        return cls(**{k: share for k in FAULT_KINDS}, **kw)

    def pick(self, body: bytes, seen: int) -> str | None:
        digest = hashlib.sha256(self.seed.to_bytes(8, "big") + seen.to_bytes(8, "big") + body).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        acc = 0.0
        for kind in FAULT_KINDS:
            acc += getattr(self, kind)
            if u < acc:
                return kind
        return None


@dataclass
class Stats:
    requests: int = 0
    completions: int = 0
    embedding_requests: int = 0     # answered /v1/embeddings requests
    embedded_texts: int = 0         # texts in those requests
    tokenize_requests: int = 0      # answered /tokenize requests
    in_flight: int = 0
    max_in_flight: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    by_body: dict[str, int] = field(default_factory=dict)


def _tokens(text: str) -> int:
    return max(1, len(text.split()))


def hash_vector(text: str, dim: int) -> list[float]:
    """The loopback's embedding of ``text``: a unit vector drawn from a hash of the text."""
    out: list[float] = []
    counter = 0
    while len(out) < dim:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        out += [(int.from_bytes(digest[i:i + 4], "big") / 2**32) * 2 - 1 for i in range(0, 32, 4)]
        counter += 1
    out = out[:dim]
    norm = sum(x * x for x in out) ** 0.5 or 1.0
    return [x / norm for x in out]


class LoopbackServer:
    """Run the endpoint in a background thread: ``with LoopbackServer(...) as srv: srv.base_url``."""

    def __init__(
        self,
        policy: str | Policy | Mapping[str, Any] = "first_admissible",
        faults: Faults | None = None,
        model: str = "loopback-model",
        host: str = "127.0.0.1",
        port: int = 0,
        embeddings: bool = True,
        embed_dim: int = 16,
        no_embeddings_status: int = 404,
        keep_requests: bool = False,
        serve_as: Mapping[str, Any] | None = None,
        tokenize: bool = True,
        router: Mapping[str, Any] | None = None,
        prefix_cache: int = 0,
    ) -> None:
        """``embeddings=False`` makes a chat-only server: ``/v1/embeddings`` answers
        ``no_embeddings_status`` (404, 405 or 501; 200 answers a body without ``data``).
        ``keep_requests`` keeps every request as received (path, headers, body bytes) in
        ``received``, so a test can compare what two clients put on the wire.
        ``serve_as`` plays a router: ``model`` replaces the echoed model id in replies,
        ``provider`` adds a ``provider`` field, ``cost`` a billed ``usage.cost`` per reply.
        ``router`` plays a router's headers and refusals (:mod:`memtrials.testing.router`):
        ``headers`` are sent with every answered chat or embeddings reply; ``refuse``
        (``(status, body)``) answers every chat and embeddings request instead, and also
        ``GET /v1/models`` when ``refuse_models`` is true.
        ``prefix_cache`` plays a provider's prefix cache over the last that many prompts: each reply's
        ``usage.prompt_tokens_details.cached_tokens`` counts the whole words of the longest prefix
        the prompt shares with one of them (0: no such field, as before)."""
        self.serve_as = dict(serve_as or {})
        self.router = dict(router or {})
        self.prefix_cache = int(prefix_cache)
        self._prompts: collections.deque[str] = collections.deque(maxlen=max(1, self.prefix_cache))
        self.keep_requests = keep_requests
        self.received: list[tuple[str, dict[str, str], bytes]] = []
        self.policy = make_policy(policy)
        self.embeddings = embeddings
        self.tokenize = tokenize
        self.embed_dim = embed_dim
        self.no_embeddings_status = no_embeddings_status
        self.faults = faults or Faults()
        self.model = model
        self.host = host
        self.port = port
        self.stats = Stats()
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    # -- lifecycle -------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def start(self) -> "LoopbackServer":
        self._thread = threading.Thread(target=self._run, name="loopback-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("loopback server did not start")
        return self

    def _run(self) -> None:
        self._loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(asyncio.start_server(self._handle, self.host, self.port, limit=2**24))
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()
        self._server.close()
        pending = [t for t in asyncio.all_tasks(self._loop) if not t.done()]
        for task in pending:
            task.cancel()
        self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self._loop.close()

    def stop(self) -> None:
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> "LoopbackServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def reset_stats(self) -> None:
        with self._lock:
            self.stats = Stats()

    # -- HTTP ------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request_line = await reader.readline()
                if not request_line:
                    break
                method, path, _ = request_line.decode("latin-1").split(" ", 2)
                headers: dict[str, str] = {}
                while True:
                    line = await reader.readline()
                    if line in (b"\r\n", b"\n", b""):
                        break
                    name, _, value = line.decode("latin-1").partition(":")
                    headers[name.strip().lower()] = value.strip()
                body = await reader.readexactly(int(headers.get("content-length", "0") or 0))
                if self.keep_requests:
                    self.received.append((path, headers, body))
                keep = await self._dispatch(method, path.split("?")[0], body, writer)
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, ValueError):
            pass
        except asyncio.CancelledError:
            # Only :meth:`stop` cancels a handler (a request held by an injected timeout, or an idle
            # keep-alive connection).  Ending it normally here, rather than re-raising, keeps
            # Python 3.11's stream callback (which calls ``task.exception()`` on the finished
            # handler) from logging a CancelledError traceback for every such connection.
            pass
        finally:
            try:
                writer.close()
            except Exception:
                pass

    async def _send(self, writer: asyncio.StreamWriter, status: int, payload: bytes, extra: Mapping[str, str] = {},
                    declared_length: int | None = None) -> None:
        reason = {200: "OK", 404: "Not Found", 405: "Method Not Allowed", 429: "Too Many Requests",
                  500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable",
                  400: "Bad Request", 401: "Unauthorized", 403: "Forbidden"}.get(status, "Error")
        head = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json",
                f"Content-Length: {declared_length if declared_length is not None else len(payload)}"]
        head += [f"{k}: {v}" for k, v in extra.items()]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + payload)
        await writer.drain()

    async def _dispatch(self, method: str, path: str, body: bytes, writer: asyncio.StreamWriter) -> bool:
        refuse = self.router.get("refuse")
        if refuse and (method == "POST" and path.endswith(("/chat/completions", "/embeddings"))
                       or self.router.get("refuse_models") and path.endswith("/models")):
            with self._lock:
                self.stats.requests += 1
            status, reply = refuse
            await self._send(writer, status, reply if isinstance(reply, bytes) else json.dumps(reply).encode())
            return True
        if method == "GET" and path in ("/v1/models", "/models"):
            await self._send(writer, 200, json.dumps({"object": "list", "data": [
                {"id": self.model, "object": "model", "owned_by": "memtrials"}]}).encode())
            return True
        if method == "GET" and path == "/health":
            await self._send(writer, 200, b'{"status": "ok"}')
            return True
        if method == "GET" and path == "/_stats":
            with self._lock:
                await self._send(writer, 200, json.dumps(asdict(self.stats)).encode())
            return True
        if method == "POST" and path in ("/v1/chat/completions", "/chat/completions"):
            return await self._serve(body, writer, self._completion_payload)
        if method == "POST" and path in ("/v1/embeddings", "/embeddings"):
            if self.embeddings:
                return await self._serve(body, writer, self._embedding_payload)
            with self._lock:
                self.stats.requests += 1
            status = self.no_embeddings_status
            await self._send(writer, status, b'{"object": "list", "note": "no embeddings here"}' if status == 200 else
                             json.dumps({"error": {"message": f"no route {method} {path}"}}).encode())
            return True
        if method == "POST" and path == "/tokenize" and self.tokenize:
            text = str(json.loads(body or b"{}").get("content", ""))
            if self.faults.latency_s:
                await asyncio.sleep(self.faults.latency_s)
            with self._lock:
                self.stats.tokenize_requests += 1
            await self._send(writer, 200, json.dumps({"tokens": list(range(len(text.split())))}).encode())
            return True
        await self._send(writer, 404, json.dumps({"error": {"message": f"no route {method} {path}"}}).encode())
        return True

    def _completion_payload(self, request: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, self._completion(request, self.policy(request))

    def _embedding_payload(self, request: Mapping[str, Any]) -> tuple[int, dict[str, Any]]:
        inputs = request.get("input")
        inputs = [inputs] if isinstance(inputs, str) else inputs
        if not isinstance(inputs, list) or not inputs or not all(isinstance(t, str) for t in inputs):
            return 400, {"error": {"message": "input must be a string or a non-empty list of strings"}}
        dim = int(request.get("dimensions") or self.embed_dim)
        used = sum(_tokens(t) for t in inputs)
        return 200, {
            "object": "list", "model": self.serve_as.get("model") or request.get("model", self.model),
            "data": [{"object": "embedding", "index": i, "embedding": hash_vector(t, dim)} for i, t in enumerate(inputs)],
            "usage": self._billed({"prompt_tokens": used, "total_tokens": used}),
            **self._provider(),
        }

    def _cached(self, prompt: str) -> dict[str, Any]:
        """``prompt_tokens_details.cached_tokens`` where ``prefix_cache`` is on (``__init__``)."""
        if not self.prefix_cache:
            return {}
        with self._lock:
            best = max((common_prefix(prompt, p) for p in self._prompts), default=0)
            self._prompts.append(prompt)
        return {"prompt_tokens_details": {"cached_tokens": whole_words(prompt, best)}}

    def _billed(self, usage: dict[str, Any]) -> dict[str, Any]:
        return {**usage, "cost": self.serve_as["cost"]} if "cost" in self.serve_as else usage

    def _provider(self) -> dict[str, Any]:
        return {"provider": self.serve_as["provider"]} if "provider" in self.serve_as else {}

    async def _serve(self, body: bytes, writer: asyncio.StreamWriter,
                     answer: Callable[[Mapping[str, Any]], tuple[int, dict[str, Any]]]) -> bool:
        """Answer one POST: count it, inject its fault (if any), else reply with ``answer``."""
        digest = hashlib.sha256(body).hexdigest()[:16]
        with self._lock:
            st = self.stats
            st.requests += 1
            seen = st.by_body.get(digest, 0)
            st.by_body[digest] = seen + 1
            st.in_flight += 1
            st.max_in_flight = max(st.max_in_flight, st.in_flight)
        try:
            fault = self.faults.pick(body, seen)
            if fault:
                with self._lock:
                    st.faults[fault] = st.faults.get(fault, 0) + 1
            if self.faults.latency_s:
                await asyncio.sleep(self.faults.latency_s)
            if fault == "rate_429":
                await self._send(writer, 429, b'{"error": {"message": "rate limited (injected)", "type": "rate_limit"}}',
                                 {"Retry-After": f"{self.faults.retry_after_s}"})
                return True
            if fault in ("rate_500", "rate_503"):
                code = 500 if fault == "rate_500" else 503
                await self._send(writer, code, b'{"error": {"message": "server error (injected)"}}')
                return True
            if fault == "rate_drop":
                writer.transport.abort()
                return False
            if fault == "rate_timeout":  # a reply slower than any sane client timeout
                await asyncio.sleep(self.faults.timeout_delay_s)
                writer.transport.abort()
                return False
            try:
                request = json.loads(body)
            except json.JSONDecodeError:
                await self._send(writer, 400, b'{"error": {"message": "body is not JSON"}}')
                return True
            status, reply = answer(request)
            payload = json.dumps(reply).encode()
            if status != 200:
                await self._send(writer, status, payload)
                return True
            if fault == "rate_malformed":
                await self._send(writer, 200, payload[: len(payload) // 2] + b"<<not json")
                return True
            if fault == "rate_truncated":
                await self._send(writer, 200, payload[: len(payload) // 2], declared_length=len(payload))
                writer.transport.close()
                return False
            await self._send(writer, 200, payload, self.router.get("headers") or {})
            with self._lock:
                if answer == self._completion_payload:
                    st.completions += 1
                else:
                    st.embedding_requests += 1
                    st.embedded_texts += len(reply["data"])
            return True
        finally:
            with self._lock:
                st.in_flight -= 1

    def _completion(self, request: Mapping[str, Any], content: str) -> dict[str, Any]:
        prompt = "\n".join(str(m.get("content", "")) for m in request.get("messages") or [])
        completion_tokens = _tokens(content)
        finish = "stop"
        max_tokens = request.get("max_tokens")
        if max_tokens and completion_tokens > int(max_tokens):
            content = " ".join(content.split()[: int(max_tokens)])
            completion_tokens = int(max_tokens)
            finish = "length"
        return {
            "id": "chatcmpl-" + hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:24],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.serve_as.get("model") or request.get("model", self.model),
            "system_fingerprint": FINGERPRINT,
            **self._provider(),
            "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": content}}],
            "usage": self._billed({"prompt_tokens": _tokens(prompt), "completion_tokens": completion_tokens,
                                   "total_tokens": _tokens(prompt) + completion_tokens, **self._cached(prompt)}),
        }
