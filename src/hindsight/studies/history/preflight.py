"""Checks of the ``history:`` section against the environments it names, before any job.

``history.splits`` and ``history.env_options`` name things of the environments (a split of
a task table, a keyword of an environment's constructor); ``history.tasks_per_cell`` asks a
split for that many tasks.  A mistake in any of them would otherwise surface inside a job,
after other cells had spent calls.  Here each is checked when the workflow is parsed, with
a message naming the key, the allowed values and the fix.

A split's size is known before its task table exists for the generated data (the ALFWorld
game counts in ``envs.alfworld.sizes``, the authored AppWorld set); for official data it is
known once ``results/tasks/{env}.parquet`` has been built (otherwise the cell checks it
before its first call: :func:`hindsight.studies.history.design.read_tasks`).
"""

from __future__ import annotations

import inspect
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

from hindsight.config import ConfigError
from hindsight.envs.tasks import ENV_NAMES
from hindsight.studies.history.design import too_few_tasks_fix

SCIENCEWORLD_SPLITS: tuple[str, ...] = ("train", "dev", "test")
MAKE_ENV_OPTIONS: tuple[str, ...] = ("process",)
"""Options of :func:`hindsight.envs.make_env` itself (the rest are the constructor's)."""


def source(env: str, envs_cfg: Mapping[str, Any]) -> str:
    """``generated`` or ``official``: where ``env``'s task table comes from (``envs.<env>.source``)."""
    if env == "scienceworld":
        return "official"
    return str(envs_cfg[env]["source"])


def allowed_splits(env: str, envs_cfg: Mapping[str, Any]) -> tuple[str, ...]:
    """The split names ``env``'s task table holds under its configured source."""
    if env == "scienceworld":
        return SCIENCEWORLD_SPLITS
    if env == "alfworld":
        from hindsight.envs.alfworld import OFFICIAL_SPLITS
        from hindsight.envs.alfworld_gen import SPLITS

        return tuple(OFFICIAL_SPLITS) if source(env, envs_cfg) == "official" else SPLITS
    from hindsight.envs.appworld import GENERATED_SPLITS, OFFICIAL_SPLITS

    return OFFICIAL_SPLITS if source(env, envs_cfg) == "official" else GENERATED_SPLITS


def env_option_names(env: str) -> tuple[str, ...]:
    """Keyword options ``make_env(env, ...)`` accepts (the constructor's, plus ``process``)."""
    if env == "scienceworld":
        from hindsight.envs.scienceworld import ScienceWorldEnv as cls
    elif env == "alfworld":
        from hindsight.envs.alfworld import AlfworldEnv as cls  # type: ignore[assignment]
    else:
        from hindsight.envs.appworld import AppWorldEnv as cls  # type: ignore[assignment]
    return tuple(inspect.signature(cls).parameters) + MAKE_ENV_OPTIONS


def split_size(env: str, split: str | None, envs_cfg: Mapping[str, Any],
               tasks_dir: str | Path = "results/tasks") -> tuple[int, str] | None:
    """``(tasks in split, where that count comes from)``, or ``None`` when not known yet."""
    table = Path(tasks_dir) / f"{env}.parquet"
    if table.is_file():
        import pandas as pd

        splits = pd.read_parquet(table, columns=["split"])["split"].astype(str)
        return int(len(splits) if split is None else (splits == split).sum()), str(table)
    if split is None or source(env, envs_cfg) != "generated":
        return None
    if env == "alfworld":
        sizes = envs_cfg["alfworld"]["sizes"]
        return (int(sizes[split]), "the generated games, envs.alfworld.sizes") if split in sizes else None
    if env == "appworld":
        from hindsight.envs.appworld_tasks import task_specs

        count = Counter(s.split for s in task_specs(int(envs_cfg["seed"])))
        return int(count.get(split, 0)), "the project-authored AppWorld task set"
    return None


def check_history_envs(h: Mapping[str, Any], envs_cfg: Mapping[str, Any],
                       tasks_dir: str | Path = "results/tasks") -> None:
    """Raise :class:`ConfigError` for an unknown split, an unknown environment option, or a
    split smaller than ``history.tasks_per_cell`` (module docstring)."""
    for key in ("splits", "env_options"):
        unknown = sorted(set(h[key] or {}) - set(ENV_NAMES))
        if unknown:
            raise ConfigError(f"config key history.{key}: unknown environment(s) {unknown}; "
                              f"allowed: {', '.join(ENV_NAMES)}; remove or rename the entry")
    for env in h["envs"]:
        split = h["splits"][env]  # present: HistoryWorkflow.check asks for an entry per environment
        allowed = allowed_splits(env, envs_cfg)
        if split is not None and str(split) not in allowed:
            raise ConfigError(
                f"config key history.splits.{env}: unknown split {split!r} for the {source(env, envs_cfg)} "
                f"{env} data; allowed: {', '.join(allowed)} (or null: every split); set `{env}: <split>`")
    for env, options in (h["env_options"] or {}).items():
        names = env_option_names(env)
        unknown = sorted(set(options or {}) - set(names))
        if unknown:
            raise ConfigError(
                f"config key history.env_options.{env}: unknown option(s) {unknown}; allowed: {', '.join(names)} "
                f"(keyword options of hindsight.envs.make_env('{env}', ...)); remove or rename them")
    n = h["tasks_per_cell"]
    for env in h["envs"]:
        split = h["splits"][env]
        known = split_size(env, split, envs_cfg, tasks_dir)
        if known is not None and isinstance(n, int) and n > known[0]:
            size, where = known
            label = repr(split) if split is not None else "(all splits)"
            raise ConfigError(
                f"config key history.tasks_per_cell: {n} tasks per cell, but the {env} split {label} holds "
                f"{size} tasks ({where}); {too_few_tasks_fix(env)}")
