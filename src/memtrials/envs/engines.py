"""In-process constructors of the environments (the engines themselves).

:func:`memtrials.envs.make_env` is what callers use; it runs some engines in a child
process (:mod:`memtrials.envs.process.child`), whose child builds the engine here.
"""

from __future__ import annotations

from typing import Any

from memtrials.envs.base import Env
from memtrials.envs.tasks import ENV_NAMES


def build_engine(name: str, **options: Any) -> Env:
    """A new environment object of ``name`` in this process (engines imported lazily)."""
    if name == "scienceworld":
        from memtrials.envs.scienceworld.env import ScienceWorldEnv

        return ScienceWorldEnv(**options)
    if name == "alfworld":
        from memtrials.envs.alfworld.env import AlfworldEnv

        return AlfworldEnv(**options)
    if name == "appworld":
        from memtrials.envs.appworld.env import AppWorldEnv

        return AppWorldEnv(**options)
    if name == "webshop":
        from memtrials.envs.webshop.env import WebShopEnv

        return WebShopEnv(**options)
    if name == "planted":
        from memtrials.envs.planted.env import PlantedEnv

        return PlantedEnv(**options)
    raise ValueError(f"make_env: unknown environment {name!r}; expected one of {ENV_NAMES}")
