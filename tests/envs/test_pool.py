"""EnvPool: calls of thread-safe environments overlap, the others are serialized under the
pool's lock (TextWorld's parser corrupts shared state when two games load at once)."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from memtrials.envs.pool import EnvPool


class Fake:
    """Counts how many of its class's calls run at once."""

    def __init__(self, state: dict, thread_safe: bool) -> None:
        self.state = state
        if thread_safe:
            self.thread_safe = True

    def step(self, barrier: threading.Barrier | None = None) -> None:
        with self.state["lock"]:
            self.state["now"] += 1
            self.state["peak"] = max(self.state["peak"], self.state["now"])
        try:
            if barrier is not None:
                barrier.wait(timeout=5)  # both calls must be inside at once
            else:
                time.sleep(0.05)
        finally:
            with self.state["lock"]:
                self.state["now"] -= 1

    def close(self) -> None:
        pass


async def _play(thread_safe: bool, barrier: threading.Barrier | None) -> dict:
    state = {"lock": threading.Lock(), "now": 0, "peak": 0}
    async with EnvPool(lambda: Fake(state, thread_safe), 2) as pool:
        await pool.fill()
        a, b = await pool.acquire(), await pool.acquire()
        await asyncio.gather(pool.caller(a)(a.step, barrier), pool.caller(b)(b.step, barrier))
    return state


def test_thread_safe_envs_step_at_once():
    state = asyncio.run(_play(True, threading.Barrier(2)))
    assert state["peak"] == 2


def test_other_envs_are_serialized_under_the_pool_lock():
    state = asyncio.run(_play(False, None))
    assert state["peak"] == 1
    with pytest.raises(threading.BrokenBarrierError):  # the lock keeps the second call out
        asyncio.run(_play(False, threading.Barrier(2, timeout=0.5)))


def test_which_engines_run_unlocked():
    """ScienceWorld (one JVM and gateway per object) and process-backed envs run unlocked;
    ALFWorld in this process (TextWorld) stays under the lock."""
    from memtrials.envs.alfworld.env import AlfworldEnv
    from memtrials.envs.process.child import ProcessEnv
    from memtrials.envs.scienceworld.env import ScienceWorldEnv

    assert ScienceWorldEnv.thread_safe is True and ProcessEnv.thread_safe is True
    assert not getattr(AlfworldEnv, "thread_safe", False)


@pytest.mark.slow
def test_two_scienceworld_envs_step_at_once_in_the_pool(monkeypatch):
    """Real engines: two ScienceWorld objects' calls overlap in the pool (a pool-wide lock
    would keep the second call out of the barrier)."""
    from memtrials.envs.scienceworld.env import ScienceWorldEnv

    barrier = threading.Barrier(2, timeout=60)

    class Met(ScienceWorldEnv):
        def admissible_actions(self):
            barrier.wait()
            return super().admissible_actions()

    async def main() -> list:
        async with EnvPool(lambda: Met(join_admissible=True), 2) as pool:
            await pool.fill()
            a, b = await pool.acquire(), await pool.acquire()
            await asyncio.gather(pool.caller(a)(a.reset, "boil:0"), pool.caller(b)(b.reset, "boil:0"))
            return await asyncio.gather(pool.caller(a)(a.admissible_actions), pool.caller(b)(b.admissible_actions))

    got = asyncio.run(main())
    assert got[0] == got[1] and len(got[0]) > 10
