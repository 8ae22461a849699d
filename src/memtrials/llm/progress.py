"""Progress of a long cell: calls done of total, tokens and cost, on the console and in the log."""

from __future__ import annotations

import logging
import time

log = logging.getLogger("memtrials.progress")


class Progress:
    """Counts calls; emits one log line at most every ``every_s`` seconds and at the end."""

    def __init__(self, cell_id: str, every_s: float = 10.0) -> None:
        self.cell_id = cell_id
        self.every_s = every_s
        self.total: int | None = None
        self.done = 0
        self.cached = 0
        self.tokens = 0
        self.cost = 0.0
        self.started = time.monotonic()
        self._last = 0.0

    def expect(self, n: int) -> None:
        self.total = (self.total or 0) + int(n)

    def add(self, tokens: int, cost: float, cached: bool) -> None:
        self.done += 1
        self.cached += int(cached)
        self.tokens += tokens
        self.cost += cost
        now = time.monotonic()
        if now - self._last >= self.every_s or (self.total and self.done == self.total):
            self._last = now
            log.info(self.line())

    def line(self) -> str:
        of = f"/{self.total}" if self.total else ""
        elapsed = time.monotonic() - self.started
        return (
            f"{self.cell_id}: {self.done}{of} calls ({self.cached} from cache), "
            f"{self.tokens:,} tokens, ${self.cost:.4f}, {elapsed:.0f} s"
        )
