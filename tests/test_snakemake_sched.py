"""hindsight.snakemake_sched: Snakemake's scheduler reads each ready job's input sizes once."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

from snakemake.scheduling.job_scheduler import JobScheduler

from hindsight import snakemake_sched


class Path(str):
    """A stand-in for Snakemake's _IOFile (a str) that counts the file-system questions."""

    asked: list[str] = []
    sizes: dict[str, int | None] = {}

    async def exists(self) -> bool:
        Path.asked.append(str(self))
        return Path.sizes.get(str(self)) is not None

    async def size(self) -> int:
        return int(Path.sizes[str(self)])


def test_installed_on_this_snakemake_and_idempotent():
    assert snakemake_sched.memoize_input_sizes()
    assert JobScheduler.update_input_sizes is snakemake_sched.update_input_sizes
    assert snakemake_sched.memoize_input_sizes()  # a second call changes nothing


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

    monkeypatch.setattr(JobScheduler, "update_input_sizes", lambda self, jobs: None)
    assert not snakemake_sched.memoize_input_sizes()  # not a coroutine with (self, jobs)
    monkeypatch.setattr(snakemake, "__version__", "10.0.0")

    async def update_input_sizes(self, jobs):
        return None

    monkeypatch.setattr(JobScheduler, "update_input_sizes", update_input_sizes)
    assert not snakemake_sched.memoize_input_sizes()
    assert JobScheduler.update_input_sizes is update_input_sizes
