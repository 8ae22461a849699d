"""In-process constructors of the environments (the engines themselves).

:func:`hindsight.envs.make_env` is what callers use; it runs some engines in a child
process (:mod:`hindsight.envs.procenv`), whose child builds the engine here.
"""

from __future__ import annotations

from typing import Any

from hindsight.envs.base import Env
from hindsight.envs.tasks import ENV_NAMES


def build_engine(name: str, **options: Any) -> Env:
    """A new environment object of ``name`` in this process (engines imported lazily)."""
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
