"""Request order (issue 39's throughput at 4x): the endpoint's slots granted by rank
(:class:`memtrials.llm.limits.RankedSlots`) and the episode runner's order
(:mod:`memtrials.agent.order`).

The schedule is played on a virtual clock (:mod:`memtrials.testing.schedule`: the runner's
admission and order, the client's slots, every request one tick of the endpoint), so a job's
length in ticks is what its order makes of it (no wall time measured).
"""

from __future__ import annotations

import asyncio
import random

import pytest

from memtrials.llm.limits import REQUEST_RANK, RankedSlots
from memtrials.testing.schedule import ideal_ticks as ideal
from memtrials.testing.schedule import job_ticks as ticks


def test_first_come_ends_in_a_short_last_wave_and_the_progress_order_does_not():
    # the scale benchmark's 4x shape: 200 episodes of 30 requests, 64 in flight, 32 slots
    lengths = [30] * 200
    assert ideal(lengths, 32) == 188
    assert ticks(lengths, 64, 32, "fifo") == 210  # 3 waves of 64 (60 ticks each) and one of 8 (30): 0.89
    assert ticks(lengths, 64, 32, "progress") == 188  # the ideal


def test_the_progress_order_is_never_behind_first_come_on_episodes_that_end_early():
    ratios = {"fifo": [], "progress": []}
    for seed in range(4):
        rng = random.Random(seed)
        lengths = [rng.randint(3, 30) for _ in range(120)]  # tasks won early, unknown in advance
        for order in ratios:
            ratios[order].append(ideal(lengths, 16) / ticks(lengths, 40, 16, order))
    for f, p in zip(ratios["fifo"], ratios["progress"]):
        assert p >= f
    assert sum(ratios["progress"]) / 4 >= 0.93 > sum(ratios["fifo"]) / 4


@pytest.mark.parametrize("order", ["fifo", "progress"])
def test_with_as_many_slots_as_episodes_in_flight_the_order_changes_nothing(order):
    assert ticks([6] * 25, 8, 8, order) == ticks([6] * 25, 8, 8, "fifo")


def test_slots_without_ranks_are_first_come():
    async def main():
        slots, got = RankedSlots(1), []

        async def one(k):
            async with slots:
                got.append(k)
                await asyncio.sleep(0)

        await asyncio.gather(*(one(k) for k in range(6)))
        return got

    assert asyncio.run(main()) == list(range(6))


class Rank:
    def __init__(self, value):
        self.value, self.grants = value, 0

    def rank(self):
        return self.value

    def granted(self):
        self.grants += 1


def test_a_freed_slot_goes_to_the_lowest_rank_read_when_it_frees():
    async def main():
        slots, got, ranks = RankedSlots(1), [], [Rank(v) for v in (5, 1, 3, 2)]
        await slots.acquire()  # held: every request below waits

        async def one(k):
            REQUEST_RANK.set(ranks[k])
            async with slots:
                got.append(k)

        tasks = [asyncio.ensure_future(one(k)) for k in range(4)]
        await asyncio.sleep(0)
        assert slots.waiting() == 4
        ranks[0].value = 0  # ranks are read when a slot frees, not when a request arrives
        slots.release()
        await asyncio.gather(*tasks)
        return got, [r.grants for r in ranks]

    got, grants = asyncio.run(main())
    assert got == [0, 1, 3, 2]
    assert grants == [1, 1, 1, 1]


def test_a_cancelled_request_neither_takes_nor_loses_a_slot():
    async def main():
        slots = RankedSlots(2)
        await slots.acquire()
        await slots.acquire()
        waiting = [asyncio.ensure_future(slots.acquire()) for _ in range(3)]
        await asyncio.sleep(0)
        waiting[0].cancel()  # cancelled while it waits
        slots.release()  # granted to waiting[1] ...
        waiting[1].cancel()  # ... and cancelled before it ran: the slot passes on to waiting[2]
        await asyncio.gather(*waiting, return_exceptions=True)
        assert waiting[2].done() and not waiting[2].cancelled()
        assert slots.waiting() == 0 and slots.free == 0
        slots.release()
        slots.release()
        assert slots.free == 2
        # as many requests as slots again go through at once
        await asyncio.wait_for(asyncio.gather(slots.acquire(), slots.acquire()), 1)

    asyncio.run(main())


def test_the_runner_rejects_an_unknown_order():
    from memtrials.agent.runner import Runner

    with pytest.raises(ValueError, match="request.order must be one of progress, fifo"):
        Runner(None, None, None, in_flight=2, request_order="lifo")  # type: ignore[arg-type]


def test_unranked_requests_rank_0_and_wait_first_come():
    async def main():
        slots, got = RankedSlots(1), []
        await slots.acquire()

        async def one(name, rank=None):
            if rank is not None:
                REQUEST_RANK.set(rank)
            async with slots:
                got.append(name)

        tasks = [asyncio.ensure_future(one(f"plain{k}")) for k in range(500)]
        tasks += [asyncio.ensure_future(one("early", Rank(-1))), asyncio.ensure_future(one("late", Rank(1)))]
        await asyncio.sleep(0)
        slots.release()
        await asyncio.gather(*tasks)
        return got

    got = asyncio.run(main())
    assert got == ["early", *(f"plain{k}" for k in range(500)), "late"]
