"""One cell's model calls: what every call path (chat, embeddings, token counts) shares.

:class:`Calls` holds a cell's endpoints, cache and recorder, and opens each endpoint's
connection on first use (:meth:`Calls.connect`: the embedded or shared server where the
endpoint has one, a planted endpoint's in-process loopback server, the OpenAI SDK client, the chat transport of :mod:`memtrials.llm.transport`
and the endpoint's limits of :mod:`memtrials.llm.limits`).  Every request goes out through
:meth:`Calls.send` (limits, cost caps and retries: :mod:`memtrials.llm.retry`); a request
already out is found in :attr:`Calls.inflight`, so it is awaited, not sent twice.
:class:`memtrials.llm.client.Client` builds the requests on top of it;
:mod:`memtrials.llm.embed` and :mod:`memtrials.llm.token_count` take it as their client.

Keys are read from the environment when an endpoint's connection is first opened and
live only inside the SDK client and the transport: never in records, logs, cache or
messages.
"""

from __future__ import annotations

import asyncio
import os
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping, TypeVar

from memtrials.config import Endpoint
from memtrials.llm.cache.sqlite import Cache
from memtrials.llm.limits import EndpointLimits
from memtrials.llm.local.embedded import EmbeddedServer
from memtrials.llm.local.embedder import server_for
from memtrials.llm.local.planted import PlantedServer
from memtrials.llm.local.shared import SharedServer
from memtrials.llm.progress import Progress
from memtrials.llm.records import Recorder
from memtrials.llm.results import BudgetExceeded, CallFailed
from memtrials.llm.serving import MismatchWarnings

if TYPE_CHECKING:  # the SDK, aiohttp and the retry loop load on a cell's first fresh call only:
    import openai  # a fully cached cell never imports them (about 1.5 CPU-s a job)

    from memtrials.llm.transport import ChatTransport

T = TypeVar("T")


class Calls:
    """A cell's endpoints, connections, limits, cost caps and counts (module docstring)."""

    def __init__(
        self,
        endpoints: Mapping[str, Endpoint],
        cache: Cache,
        recorder: Recorder,
        *,
        cell_id: str,
        run_id: str,
        request: Mapping[str, Any] | None = None,
        budget: Mapping[str, Any] | None = None,
        server_log: str | None = None,
        servers: Mapping[str, Any] | None = None,
    ) -> None:
        """``servers``: ``{"shared": bool, "idle_s": float, "dir": folder}`` (config key
        ``servers`` plus :func:`memtrials.llm.local.shared.server_dir`); shared: embedded
        endpoints use the machine's shared server (:mod:`memtrials.llm.local.shared`), else
        each client starts its own."""
        self.servers = dict(servers or {})
        self.endpoints = dict(endpoints)
        self.cache = cache
        self.recorder = recorder
        self.cell_id = cell_id
        self.run_id = run_id
        req = dict(request or {})
        self.timeout_s = float(req.get("timeout_s", 300))
        self.max_retries = int(req.get("max_retries", 8))
        self.backoff_base_s = float(req.get("backoff_base_s", 0.5))
        self.backoff_max_s = float(req.get("backoff_max_s", 60.0))
        bud = dict(budget or {})
        self.max_usd_per_run = bud.get("max_usd_per_run")
        self.max_usd_per_endpoint: dict[str, float] = dict(bud.get("max_usd_per_endpoint") or {})
        self.server_log = server_log
        self.progress = Progress(cell_id)
        self._limits: dict[str, EndpointLimits] = {}
        self._oai: dict[str, openai.AsyncOpenAI] = {}
        self._chat: dict[str, ChatTransport] = {}
        self._servers: dict[str, EmbeddedServer | SharedServer | PlantedServer] = {}
        self._start_locks: dict[str, asyncio.Lock] = {}
        self.inflight: dict[str, asyncio.Future[dict[str, Any]]] = {}
        """Requests out now, by cache key: a second caller of the same key awaits the first."""
        self.fresh_calls = 0
        # a claim on a key (Cache.claim) names this client; another cell waits for it, or
        # takes it over after the longest a call with all its retries may take
        self.owner = f"{run_id}/{cell_id}/{os.getpid()}/{id(self):x}"
        self.claim_stale_s = self.timeout_s * (self.max_retries + 1) + self.backoff_max_s * self.max_retries
        self.serving_warnings = MismatchWarnings()
        self.cache_hits = 0

    # -- endpoints -----------------------------------------------------------
    def endpoint(self, model: str) -> Endpoint:
        try:
            return self.endpoints[model]
        except KeyError:
            raise KeyError(f"unknown model '{model}' (known: {', '.join(sorted(self.endpoints))})") from None

    def supports_grammar(self, model: str) -> bool:
        """Whether chat endpoint ``model`` takes a GBNF grammar (``grammar: true``, llama.cpp)."""
        return bool(self.chat_endpoint(model).grammar)

    def chat_endpoint(self, model: str) -> Endpoint:
        """The entry of ``model``, refusing an embedding-only one (``task: embed``)."""
        ep = self.endpoint(model)
        if ep.task != "chat":
            raise CallFailed(
                f"{ep.name} ({ep.source}): a chat call to an embedding endpoint (task: embed serves only "
                f"/v1/embeddings). Fix: call client.embed('{ep.name}', texts) for vectors, or name a chat "
                f"endpoint (the panel, roles.judge, roles.calibrator) for completions."
            )
        return ep

    def supports_structured(self, model: str) -> bool:
        return self.endpoint(model).structured_output

    def expect(self, n: int) -> None:
        """Announce ``n`` more requests, so progress lines show done of total."""
        self.progress.expect(n)

    # -- connections ---------------------------------------------------------
    async def connect(self, ep: Endpoint) -> openai.AsyncOpenAI:
        """The SDK client of ``ep``, opened on first use: its embedded (or shared) server
        started where it has one, its chat transport (:meth:`transport`) and its limits
        (:meth:`limits`) made with it."""
        if ep.name in self._oai:
            return self._oai[ep.name]
        import openai

        from memtrials.llm.transport import ChatTransport

        lock = self._start_locks.setdefault(ep.name, asyncio.Lock())
        async with lock:
            if ep.name not in self._oai:
                if ep.provider == "embedded":
                    server: Any = (SharedServer(ep, self.servers["dir"], self.servers["idle_s"])
                                   if self.servers.get("shared") else server_for(ep, self.server_log))
                    base_url = await asyncio.to_thread(server.start)
                    self._servers[ep.name] = server
                    key = "EMPTY"
                elif ep.provider == "planted":  # a planted agent: the loopback server, in process
                    server = PlantedServer(ep)
                    base_url = await asyncio.to_thread(server.start)
                    self._servers[ep.name] = server
                    key = "EMPTY"
                else:
                    base_url, key = ep.base_url, ep.api_key()
                self._oai[ep.name] = openai.AsyncOpenAI(
                    base_url=base_url, api_key=key, max_retries=0, timeout=self.timeout_s
                )
                self._chat[ep.name] = ChatTransport(self._oai[ep.name], base_url, key, self.timeout_s)
                self._limits[ep.name] = EndpointLimits(ep.max_concurrency, ep.rpm, ep.tpm)
        return self._oai[ep.name]

    def transport(self, name: str) -> ChatTransport:
        """The chat transport of endpoint ``name`` (after :meth:`connect`)."""
        return self._chat[name]

    def limits(self, name: str) -> EndpointLimits:
        """The limits of endpoint ``name`` (after :meth:`connect`)."""
        return self._limits[name]

    def server(self, name: str) -> EmbeddedServer | SharedServer | PlantedServer:
        """The local server that endpoint ``name`` runs on (after :meth:`connect`; embedded and planted endpoints only)."""
        return self._servers[name]

    # -- budget --------------------------------------------------------------
    def check_budget(self, ep: Endpoint) -> None:
        """Raise :class:`~memtrials.llm.results.BudgetExceeded` once this run, or ``ep``, has
        spent its cap (``budget.max_usd_per_run``, ``budget.max_usd_per_endpoint``)."""
        if ep.price.input_per_mtok == 0 and ep.price.output_per_mtok == 0:
            return
        if self.max_usd_per_run is not None:
            spent = self.cache.spent(run_id=self.run_id)
            if spent >= float(self.max_usd_per_run):
                raise BudgetExceeded(
                    f"cost cap reached: this run ({self.run_id}) has spent ${spent:.4f} of its "
                    f"budget.max_usd_per_run = ${float(self.max_usd_per_run):.4f}; no new calls are made. "
                    f"Records so far are kept (cache and {self.recorder.journal_path}). "
                    f"Fix: raise budget.max_usd_per_run and rerun; completed calls replay from the cache."
                )
        cap = self.max_usd_per_endpoint.get(ep.name)
        if cap is not None:
            spent = self.cache.spent(endpoint=ep.name)
            if spent >= float(cap):
                raise BudgetExceeded(
                    f"cost cap reached: endpoint '{ep.name}' has spent ${spent:.4f} of its "
                    f"budget.max_usd_per_endpoint = ${float(cap):.4f}; no new calls are made. "
                    f"Fix: raise the cap and rerun; completed calls replay from the cache."
                )

    # -- sending -------------------------------------------------------------
    async def send(
        self, ep: Endpoint, est_tokens: int, send: Callable[[], Awaitable[T]],
        refuse: Callable[[openai.APIStatusError], Exception | None] | None = None,
    ) -> tuple[T, float, int, list[str], str]:
        """One request with limits, cost caps and retries (:func:`memtrials.llm.retry.send_with_retries`)."""
        from memtrials.llm.retry import send_with_retries

        return await send_with_retries(
            ep, est_tokens, send, limits=self._limits[ep.name], check_budget=self.check_budget,
            max_retries=self.max_retries, backoff_base_s=self.backoff_base_s, backoff_max_s=self.backoff_max_s,
            refuse=refuse)

    async def aclose(self) -> None:
        for transport in self._chat.values():
            await transport.close()
        self._chat.clear()
        for oai in self._oai.values():
            await oai.close()
        self._oai.clear()
        for server in self._servers.values():
            await asyncio.to_thread(server.stop)
        self._servers.clear()
