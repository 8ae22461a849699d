"""``make_env``: the one constructor of environments, in this process or in a child.

Process-backed by default for :data:`PROCESS_ENVS` (see there); ``process=`` overrides.
"""

from __future__ import annotations

from typing import Any

from memtrials.envs.base import Env
from memtrials.envs.engines import build_engine
from memtrials.envs.tasks import ENV_NAMES

PROCESS_ENVS: tuple[str, ...] = ("appworld", "alfworld")
"""Environments that :func:`make_env` runs in a child process by default.  AppWorld freezes
the process clock while a world is open (an asyncio loop in that process stops) and fixes
its data root per process.  ALFWorld's engine (TextWorld) is pure Python and not
thread-safe: in threads its calls would be serialized under one lock and one core; each
in its own process, concurrent episodes use every core (``benchmarks/bench_runner.py``)."""


def make_env(name: str, *, process: bool | None = None, **options: Any) -> Env:
    """A new environment object of ``name``; ``options`` are its constructor's keyword options.

    ``process``: run it in a child process (:class:`~memtrials.envs.process.child.ProcessEnv`; forked
    from a warm per-machine fork server when ``envs.fork_server`` configured one, see
    :mod:`memtrials.envs.process.forkserver`);
    default ``True`` for :data:`PROCESS_ENVS`, so AppWorld is safe next to asyncio in any
    process and ALFWorld episodes run in parallel.  ``process=False`` builds the engine in this process.

    * ``scienceworld``: ``simplification`` (``""``), ``max_steps`` (``None``);
    * ``alfworld``: ``root`` (games folder; default ``resources/alfworld/games``),
      ``official`` (use ``$ALFWORLD_DATA/json_2.1.1``), ``max_steps``;
    * ``appworld``: ``root`` (AppWorld data root; default ``resources/appworld``, or
      ``$APPWORLD_ROOT`` with ``official=True``), ``max_steps``, ``experiment``;
    * ``webshop``: ``root`` (data folder; default the shipped ``data/webshop``), ``max_steps``.
      In this process by default: a pure-Python engine, a step ~1 ms, every object sharing the
      process's catalog and search index read-only (``thread_safe``);
    * ``planted``: ``max_steps``; the planted world (no data, a step in microseconds, in this process).
    """
    if name not in ENV_NAMES:
        raise ValueError(f"make_env: unknown environment {name!r}; expected one of {ENV_NAMES}")
    if process if process is not None else name in PROCESS_ENVS:
        from memtrials.envs.process.child import ProcessEnv

        return ProcessEnv(name, options)  # type: ignore[return-value]
    return build_engine(name, **options)
