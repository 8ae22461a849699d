"""A job's request schedule on a virtual clock: episodes of given lengths (requests each),
admitted ``in_flight`` at a time as the runner admits them (:class:`memtrials.agent.order.Admission`),
their requests taking ``slots`` endpoint slots (:class:`memtrials.llm.limits.RankedSlots`) in the
job's order (``request.order``); every request takes one tick of the endpoint.  The ticks a job
takes are what its order makes of it, with no wall time in it: ``tests/agent/test_order.py``
checks the orders with it, and ``benchmarks/bench_scale.py`` gives each measured job the bound its
order and its episodes' measured lengths put on its throughput."""

from __future__ import annotations

import asyncio
import math
from typing import Sequence

from memtrials.agent.order import Admission
from memtrials.llm.limits import RankedSlots

__all__ = ["ideal_ticks", "job_ticks"]


class _Clock:
    """An endpoint that answers every request sent during a tick at the tick's end."""

    def __init__(self) -> None:
        self.pending: list[asyncio.Future] = []
        self.busy = self.peak = 0

    async def request(self) -> None:
        self.busy += 1
        self.peak = max(self.peak, self.busy)
        fut = asyncio.get_running_loop().create_future()
        self.pending.append(fut)
        try:
            await fut
        finally:
            self.busy -= 1

    async def run(self, tasks: Sequence[asyncio.Future]) -> int:
        ticks = 0
        while True:
            for _ in range(30):  # every woken task sends its next request before the tick ends
                await asyncio.sleep(0)
            if all(t.done() for t in tasks):
                return ticks
            now, self.pending = self.pending, []
            for fut in now:
                fut.set_result(None)
            ticks += 1


async def _job(lengths: Sequence[int], in_flight: int, slots: int, order: str) -> tuple[int, int]:
    clock, limit, admission = _Clock(), RankedSlots(slots), Admission(in_flight)

    async def episode(m: int) -> None:
        async with admission.turn(order):  # as the runner plays an episode
            for _ in range(m):
                async with limit:
                    await clock.request()

    tasks = [asyncio.ensure_future(episode(int(m))) for m in lengths]
    ticks = await clock.run(tasks)
    await asyncio.gather(*tasks)
    return ticks, clock.peak


def job_ticks(lengths: Sequence[int], in_flight: int, slots: int, order: str) -> int:
    """Ticks a job of episodes of ``lengths`` requests takes in ``order`` (``progress`` or ``fifo``),
    episodes started in the given order; never more than ``slots`` requests out at once."""
    ticks, peak = asyncio.run(_job(lengths, in_flight, slots, order))
    if peak > slots:
        raise AssertionError(f"{peak} requests in flight on {slots} slots")
    return ticks


def ideal_ticks(lengths: Sequence[int], slots: int) -> int:
    """The fewest ticks any order can take: every slot busy, or the longest episode."""
    return max(math.ceil(sum(lengths) / slots), max(lengths))
