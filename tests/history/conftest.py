"""Shared ScienceWorld engines for the history tests (a JVM start costs seconds)."""

from __future__ import annotations

import itertools
from typing import Any, Callable

import pytest


class _Shared:
    """An environment that a cell may 'close' without ending the shared engine."""

    def __init__(self, env: Any) -> None:
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def close(self) -> None:  # the session fixture closes the engine
        pass


@pytest.fixture(scope="session")
def sw_engines():
    from memtrials.envs.scienceworld.env import ScienceWorldEnv

    engines = [ScienceWorldEnv(), ScienceWorldEnv()]
    yield engines
    for e in engines:
        e.close()


@pytest.fixture
def sw_make(sw_engines) -> Callable[[], Callable[[], Any]]:
    """``sw_make()`` -> a factory for one cell: its first call gives engine 0, the next engine 1."""

    def make() -> Callable[[], Any]:
        counter = itertools.count()
        return lambda: _Shared(sw_engines[next(counter) % len(sw_engines)])

    return make
