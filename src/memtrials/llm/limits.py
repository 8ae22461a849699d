"""Per-endpoint limits: bounded in-flight requests and token buckets for rpm/tpm."""

from __future__ import annotations

import asyncio
import time


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


class EndpointLimits:
    """What one process may send to one endpoint at once."""

    def __init__(self, max_concurrency: int, rpm: float | None = None, tpm: float | None = None) -> None:
        self.semaphore = asyncio.Semaphore(max_concurrency)
        self.requests = TokenBucket(rpm) if rpm else None
        self.tokens = TokenBucket(tpm) if tpm else None

    async def admit(self, estimated_tokens: int) -> None:
        """Wait for the rate buckets (call while holding ``semaphore``)."""
        if self.requests is not None:
            await self.requests.acquire(1)
        if self.tokens is not None:
            await self.tokens.acquire(estimated_tokens)
