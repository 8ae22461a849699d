"""The environments of the studies behind one interface (:mod:`hindsight.envs.base`).

* :func:`make_env` -- ``make_env("scienceworld" | "alfworld" | "appworld", **options) -> Env``;
* :func:`load_tasks` -- the split table ``results/tasks/{env}.parquet`` as a DataFrame
  (columns ``task_id, env, split, type, source, detail``; see :mod:`hindsight.envs.tasks`);
* :mod:`hindsight.envs.agents` -- scripted gold and random agents and ``run_episode``.

Engines are imported lazily, so importing this package is cheap.
"""

from __future__ import annotations

from typing import Any

from hindsight.envs.base import Env, Observation, RestoreMismatch
from hindsight.envs.pool import EnvPool, env_factory
from hindsight.envs.tasks import ENV_NAMES, load_tasks

__all__ = ["ENV_NAMES", "PROCESS_ENVS", "Env", "EnvPool", "Observation", "RestoreMismatch", "env_factory",
           "load_tasks", "make_env"]

PROCESS_ENVS: tuple[str, ...] = ("appworld", "alfworld")
"""Environments that :func:`make_env` runs in a child process by default.  AppWorld freezes
the process clock while a world is open (an asyncio loop in that process stops) and fixes
its data root per process.  ALFWorld's engine (TextWorld) is pure Python and not
thread-safe: in threads its calls would be serialized under one lock and one core; each
in its own process, concurrent episodes use every core (``benchmarks/bench_runner.py``)."""


def make_env(name: str, *, process: bool | None = None, **options: Any) -> Env:
    """A new environment object of ``name``; ``options`` are its constructor's keyword options.

    ``process``: run it in a child process (:class:`~hindsight.envs.procenv.ProcessEnv`);
    default ``True`` for :data:`PROCESS_ENVS`, so AppWorld is safe next to asyncio in any
    process and ALFWorld episodes run in parallel.  ``process=False`` builds the engine in this process.

    * ``scienceworld``: ``simplification`` (``""``), ``max_steps`` (``None``);
    * ``alfworld``: ``root`` (games folder; default ``resources/alfworld/games``),
      ``official`` (use ``$ALFWORLD_DATA/json_2.1.1``), ``max_steps``;
    * ``appworld``: ``root`` (AppWorld data root; default ``resources/appworld``, or
      ``$APPWORLD_ROOT`` with ``official=True``), ``max_steps``, ``experiment``.
    """
    if name not in ENV_NAMES:
        raise ValueError(f"make_env: unknown environment {name!r}; expected one of {ENV_NAMES}")
    if process if process is not None else name in PROCESS_ENVS:
        from hindsight.envs.procenv import ProcessEnv

        return ProcessEnv(name, options)  # type: ignore[return-value]
    if name == "scienceworld":
        from hindsight.envs.scienceworld import ScienceWorldEnv

        return ScienceWorldEnv(**options)
    if name == "alfworld":
        from hindsight.envs.alfworld import AlfworldEnv

        return AlfworldEnv(**options)
    if name == "appworld":
        from hindsight.envs.appworld import AppWorldEnv

        return AppWorldEnv(**options)
    raise ValueError(f"make_env: unknown environment {name!r}; expected one of {ENV_NAMES}")
