"""memtrials.pipeline.scheduler: Snakemake's scheduler reads each ready job's input sizes once and keeps
one re-evaluation timer pending, not one more per round."""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

from snakemake.scheduling.job_scheduler import JobScheduler

from memtrials.pipeline import scheduler as snakemake_sched


class Path(str):
    """A stand-in for Snakemake's _IOFile (a str) that counts the file-system questions."""

    asked: list[str] = []
    sizes: dict[str, int | None] = {}

    async def exists(self) -> bool:
        Path.asked.append(str(self))
        return Path.sizes.get(str(self)) is not None

    async def size(self) -> int:
        return int(Path.sizes[str(self)])


BOTH = ["update_input_sizes", "_schedule_reevalutation"]


def test_installed_on_this_snakemake_and_idempotent():
    assert snakemake_sched.speed_up_scheduler() == BOTH
    assert JobScheduler.update_input_sizes is snakemake_sched.update_input_sizes
    assert JobScheduler._schedule_reevalutation is snakemake_sched.schedule_reevaluation
    assert snakemake_sched.speed_up_scheduler() == BOTH  # a second call changes nothing


def test_one_reevaluation_pending_at_a_time_and_each_wakes_the_scheduler():
    sched = SimpleNamespace(_open_jobs=threading.Semaphore(0))
    for _ in range(50):  # fifty rounds end within the timespan: one wake-up, not fifty
        snakemake_sched.schedule_reevaluation(sched, 0.3)
    assert not sched._open_jobs.acquire(timeout=0.1)
    assert sched._open_jobs.acquire(timeout=5)
    time.sleep(0.5)
    assert not sched._open_jobs.acquire(blocking=False)  # no other timer was left running
    snakemake_sched.schedule_reevaluation(sched, 0.05)  # after it fired, the next round gets a new one
    assert sched._open_jobs.acquire(timeout=5)


def test_each_known_size_is_asked_once_and_a_missing_file_again():
    Path.asked, Path.sizes = [], {"a": 3, "b": 5, "c": None}
    sched = SimpleNamespace(_input_sizes={})
    jobs = [SimpleNamespace(input=[Path("a"), Path("b")]), SimpleNamespace(input=[Path("b"), Path("c")])]
    for _ in range(3):  # three scheduling rounds with the same ready jobs
        asyncio.run(snakemake_sched.update_input_sizes(sched, jobs))
    assert sched._input_sizes == {"a": 3, "b": 5, "c": None}
    assert sorted(Path.asked) == ["a", "b", "c", "c", "c"]  # "c" did not exist: asked every round
    Path.sizes["c"] = 7  # it appears: read once more, then known
    asyncio.run(snakemake_sched.update_input_sizes(sched, jobs))
    asyncio.run(snakemake_sched.update_input_sizes(sched, jobs))
    assert sched._input_sizes["c"] == 7 and Path.asked.count("c") == 4


def test_sizes_no_ready_job_needs_are_dropped_past_the_bound(monkeypatch):
    monkeypatch.setattr(snakemake_sched, "LIMIT", 2)
    Path.asked, Path.sizes = [], {"a": 1, "b": 2, "c": 3}
    sched = SimpleNamespace(_input_sizes={})
    asyncio.run(snakemake_sched.update_input_sizes(sched, [SimpleNamespace(input=[Path("a"), Path("b")])]))
    asyncio.run(snakemake_sched.update_input_sizes(sched, [SimpleNamespace(input=[Path("c")])]))
    assert sched._input_sizes == {"c": 3}


def test_another_snakemake_is_left_alone(monkeypatch):
    import snakemake

    def other(self, jobs):
        return None

    def reevaluate(self, delay, extra):
        return None

    monkeypatch.setattr(JobScheduler, "update_input_sizes", other)  # not a coroutine
    monkeypatch.setattr(JobScheduler, "_schedule_reevalutation", reevaluate)  # other parameters
    assert snakemake_sched.speed_up_scheduler() == []
    assert JobScheduler.update_input_sizes is other and JobScheduler._schedule_reevalutation is reevaluate

    async def update_input_sizes(self, jobs):
        return None

    monkeypatch.setattr(JobScheduler, "update_input_sizes", update_input_sizes)
    monkeypatch.setattr(snakemake, "__version__", "10.0.0")
    assert snakemake_sched.speed_up_scheduler() == []
    assert JobScheduler.update_input_sizes is update_input_sizes
