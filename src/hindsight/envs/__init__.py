"""The environments of the studies behind one interface (:mod:`hindsight.envs.base`).

* :func:`make_env` -- ``make_env("scienceworld" | "alfworld" | "appworld", **options) -> Env``;
* :func:`load_tasks` -- the split table ``results/tasks/{env}.parquet`` as a DataFrame
  (columns ``task_id, env, split, type, source, detail``; see :mod:`hindsight.envs.tasks`);
* :mod:`hindsight.envs.scripted` -- scripted gold and random agents and ``run_episode``;
* :class:`EnvPool` -- environment objects for concurrent episodes (:mod:`hindsight.envs.pool`).

Engines are imported lazily, so importing this package is cheap.
"""

from __future__ import annotations

from hindsight.envs.base import Env, Observation, RestoreMismatch
from hindsight.envs.make import PROCESS_ENVS, make_env
from hindsight.envs.pool import EnvPool, env_factory
from hindsight.envs.tasks import ENV_NAMES, load_tasks

__all__ = ["ENV_NAMES", "PROCESS_ENVS", "Env", "EnvPool", "Observation", "RestoreMismatch", "env_factory",
           "load_tasks", "make_env"]
