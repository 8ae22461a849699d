"""Environment objects for concurrent episodes: one per episode in flight.

Environments are synchronous; their calls run in worker threads so that the episodes of
a cell can wait on the model concurrently.  An environment object is used by one episode at a
time.  Engines that are not thread-safe (TextWorld's PDDL parser corrupts shared state when
two games load at once: ALFWorld built in this process) have their calls serialized under
the pool's one lock, and so does every construction (a JVM start, a child's spawn).  An
environment that declares ``thread_safe = True`` runs its calls unlocked, at once with the
other objects': ScienceWorld (each object its own JVM and py4j gateway, no state shared) and
process-backed environments (:class:`~memtrials.envs.process.child.ProcessEnv`, AppWorld's and
ALFWorld's default).  tests/envs/test_pool.py checks both.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, Mapping

from memtrials.envs.base import Env


def env_factory(name: str, options: Mapping[str, Any] | None = None) -> Callable[[], Env]:
    """A zero-argument constructor of ``make_env(name, **options)``."""
    opts = dict(options or {})

    def make() -> Env:
        from memtrials.envs.make import make_env

        return make_env(name, **opts)

    return make


class EnvPool:
    """Up to ``size`` environment objects, handed to one episode at a time.

    Use as ``async with EnvPool(factory, size) as pool``: the objects are built on first
    need (or all at once with :meth:`fill`) and closed when the block ends.
    """

    def __init__(self, factory: Callable[[], Env], size: int) -> None:
        if size < 1:
            raise ValueError(f"EnvPool size must be >= 1, got {size}")
        self.factory, self.size = factory, size
        self.lock = threading.Lock()
        self._free: asyncio.Queue[Env] | None = None
        self._all: list[Env] = []
        self._created = 0

    def _queue(self) -> asyncio.Queue[Env]:
        if self._free is None:
            self._free = asyncio.Queue()
        return self._free

    async def acquire(self) -> Env:
        free = self._queue()
        if free.empty() and self._created < self.size:
            self._created += 1  # reserve the slot before the (slow) construction
            try:
                env = await self.call(None, self.factory)
            except BaseException:
                self._created -= 1
                raise
            self._all.append(env)
            return env
        return await free.get()

    async def fill(self) -> None:
        """Build every remaining environment now (so that episodes start together)."""
        free = self._queue()
        n = self.size - self._created
        self._created += n
        for _ in range(n):
            env = await self.call(None, self.factory)
            self._all.append(env)
            free.put_nowait(env)

    async def call(self, env: Env | None, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in a worker thread; under the pool's lock unless ``env`` is thread-safe."""
        if env is not None and getattr(env, "thread_safe", False):
            return await asyncio.to_thread(fn, *args)

        def locked() -> Any:
            with self.lock:
                return fn(*args)

        return await asyncio.to_thread(locked)

    def caller(self, env: Env) -> Callable[..., Any]:
        """``call`` bound to one environment: ``await caller(env)(fn, *args)``."""
        return lambda fn, *args: self.call(env, fn, *args)

    def release(self, env: Env) -> None:
        self._queue().put_nowait(env)

    def close(self) -> None:
        for env in self._all:
            env.close()
        self._all.clear()

    async def __aenter__(self) -> "EnvPool":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)
