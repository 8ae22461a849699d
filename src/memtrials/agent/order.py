"""The order in which a job's episodes are admitted and their requests sent.

A job plays its episodes ``in_flight`` at a time (:class:`Admission`); their requests share the
endpoint's ``max_concurrency`` slots (:class:`memtrials.llm.limits.RankedSlots`).  With
first-come requests, episodes admitted together advance in lock-step and end together, so a job
whose episode count is not a multiple of ``in_flight`` ends with a last wave of a few episodes
that run their whole length while most slots stay idle (at 200 episodes, 64 in flight and 32
slots no first-come runner of whole episodes gets past 0.89 of the ideal throughput:
docs/measurements.md).  :class:`EpisodeOrder` ranks each episode's requests so that slots go
first to the episodes that free a place for a waiting one, then to those that would otherwise
finish last.  Only when a request is sent changes, never what: an episode's prompts depend on its
own history alone, so records and cache keys are those of any other order.
"""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from typing import AsyncIterator

from memtrials.llm.limits import REQUEST_RANK

__all__ = ["REQUEST_ORDERS", "Admission", "EpisodeOrder"]

REQUEST_ORDERS = ("progress", "fifo")
"""How a job's waiting requests take its endpoint's free slots (config ``request.order``):
:class:`EpisodeOrder`, or first come first served."""


class Admission:
    """``places`` episodes at a time; :meth:`waiting` says whether any wait for a place."""

    def __init__(self, places: int) -> None:
        if places < 1:
            raise ValueError(f"in_flight must be >= 1, got {places}")
        self._sem = asyncio.Semaphore(places)
        self._queued = 0

    async def enter(self) -> None:
        self._queued += 1
        try:
            await self._sem.acquire()
        finally:
            self._queued -= 1

    def leave(self) -> None:
        self._sem.release()

    def waiting(self) -> bool:
        return self._queued > 0

    @asynccontextmanager
    async def turn(self, order: str) -> AsyncIterator[None]:
        """One episode's place, from admission to its end: its requests ranked by an
        :class:`EpisodeOrder` when ``order`` is ``progress`` (:data:`REQUEST_ORDERS`), first come
        otherwise.  The runner plays every episode in one (:meth:`memtrials.agent.runner.Runner.play`),
        and so does the virtual clock of :mod:`memtrials.testing.schedule`."""
        await self.enter()
        token = REQUEST_RANK.set(EpisodeOrder(self)) if order == "progress" else None
        try:
            yield
        finally:
            if token is not None:
                REQUEST_RANK.reset(token)
            self.leave()


class EpisodeOrder:
    """The rank of one episode's requests at its endpoint's slots (lowest first), from the
    requests it has been granted so far (ends are unknown, a task may be won early, so requests
    sent stand for progress):

    - while episodes wait to be admitted, the episode that has come furthest first: it ends
      sooner and makes room for a waiting one (the slots stay full either way);
    - once none waits, the episode that has come least far first: the last episodes finish
      together instead of a few running on alone while the other slots stay idle.
    """

    def __init__(self, admission: Admission) -> None:
        self.admission, self.sent = admission, 0

    def granted(self) -> None:
        self.sent += 1

    def rank(self) -> float:
        return -self.sent if self.admission.waiting() else self.sent
