"""Per-endpoint limits: bounded in-flight requests, granted in an order the caller may rank,
and token buckets for rpm/tpm."""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import time
from collections import OrderedDict
from typing import Protocol


class Ranked(Protocol):
    """What a request waiting for a slot may carry (:data:`REQUEST_RANK`): ``rank()`` is read when
    a slot frees (lowest first, ties first-come), ``granted()`` is told when the request gets one."""

    def rank(self) -> float: ...

    def granted(self) -> None: ...


REQUEST_RANK: contextvars.ContextVar[Ranked | None] = contextvars.ContextVar("memtrials_request_rank", default=None)
"""The rank of the requests the current task sends (set by the episode runner for each episode:
:class:`memtrials.agent.order.EpisodeOrder`); a request without one ranks 0."""


class TokenBucket:
    """Refills ``rate_per_min / 60`` units per second up to ``rate_per_min`` units.

    ``acquire(n)`` waits until ``n`` units are available (a request larger than the
    capacity waits for a full bucket and then takes it all, so it still proceeds).
    """

    def __init__(self, rate_per_min: float) -> None:
        self.capacity = float(rate_per_min)
        self.rate = float(rate_per_min) / 60.0
        self.level = self.capacity
        self.updated = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    async def acquire(self, amount: float = 1.0) -> None:
        amount = min(float(amount), self.capacity)
        async with self._lock:
            while True:
                self._refill()
                if self.level >= amount:
                    self.level -= amount
                    return
                await asyncio.sleep((amount - self.level) / self.rate)


class RankedSlots:
    """``size`` slots (an async context manager, as :class:`asyncio.Semaphore`): a request takes a
    free slot at once when none waits; otherwise it waits, and each freed slot goes to the waiting
    request of lowest ``rank()`` at that moment (:data:`REQUEST_RANK` of its task; a request without
    one ranks 0; ties first-come).  With no ranks this is a first-come semaphore.  The episode
    runner's order ranks its episodes' requests (:mod:`memtrials.agent.order`): only the order in
    which waiting requests are sent changes, never what is sent.  Unranked waiters wait in arrival
    order, so a release reads the ranks of the ranked ones only (a job's episodes in flight)."""

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {size}")
        self.size, self.free = int(size), int(size)
        self._plain: OrderedDict[int, asyncio.Future] = OrderedDict()
        self._ranked: dict[int, tuple[Ranked, asyncio.Future]] = {}
        self._seq = itertools.count()

    def waiting(self) -> int:
        return len(self._plain) + len(self._ranked)

    async def acquire(self) -> None:
        ranked = REQUEST_RANK.get()
        if self.free > 0 and not self.waiting():
            self.free -= 1
        else:
            key = next(self._seq)
            fut = asyncio.get_running_loop().create_future()
            if ranked is None:
                self._plain[key] = fut
            else:
                self._ranked[key] = (ranked, fut)
            try:
                await fut
            except asyncio.CancelledError:
                gone = self._plain.pop(key, None) if ranked is None else self._ranked.pop(key, None)
                if gone is None and fut.done() and not fut.cancelled():
                    self.release()  # granted as it was cancelled: pass the slot on
                raise
        if ranked is not None:
            ranked.granted()

    def _next(self) -> asyncio.Future | None:
        """The waiting request a freed slot goes to (taken off the waiting), or None."""
        best = min(((r.rank(), k) for k, (r, _) in self._ranked.items()), default=None)
        plain = next(iter(self._plain), None)
        if plain is not None and (best is None or (0.0, plain) < best):
            return self._plain.pop(plain)
        return None if best is None else self._ranked.pop(best[1])[1]

    def release(self) -> None:
        while (fut := self._next()) is not None:
            if not fut.done():
                fut.set_result(None)
                return
        self.free = min(self.size, self.free + 1)

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc: object) -> None:
        self.release()


class EndpointLimits:
    """What one process may send to one endpoint at once."""

    def __init__(self, max_concurrency: int, rpm: float | None = None, tpm: float | None = None) -> None:
        self.semaphore = RankedSlots(max_concurrency)
        self.requests = TokenBucket(rpm) if rpm else None
        self.tokens = TokenBucket(tpm) if tpm else None

    async def admit(self, estimated_tokens: int) -> None:
        """Wait for the rate buckets (call while holding ``semaphore``)."""
        if self.requests is not None:
            await self.requests.acquire(1)
        if self.tokens is not None:
            await self.tokens.acquire(estimated_tokens)
