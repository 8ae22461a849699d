"""What an environment offers before any job runs: its task-table splits, task types,
constructor options and split sizes, and the checks a study's config runs against them.

A study's keys name things of the environments (a split of a task table, a keyword of an
environment's constructor) and ask a split for some number of tasks.  A mistake in any of
them would otherwise surface inside a job, after other cells had spent calls, so each
study's workflow checks them when the workflow is parsed (``snakemake -n`` and
``python -m memtrials config check``), with a message naming the key, the allowed values
and the fix.

A split's size is known before its task table exists for the generated data (the ALFWorld
game counts in ``envs.alfworld.sizes``, the authored AppWorld set); for official data and
ScienceWorld it is known once ``results/tasks/{env}.parquet`` has been built (until then the
job checks it before its first call: :func:`memtrials.envs.tasks.select_tasks`); for WebShop it
is counted from the shipped goals (:mod:`memtrials.envs.webshop.splits`); for the planted world
from ``envs.planted.sizes`` (:mod:`memtrials.envs.planted.splits`).
"""

from __future__ import annotations

import functools
import inspect
from pathlib import Path
from typing import Any, Mapping, Sequence

from memtrials.config import ConfigError
from memtrials.envs.tasks import ENV_NAMES

SCIENCEWORLD_SPLITS: tuple[str, ...] = ("train", "dev", "test")
MAKE_ENV_OPTIONS: tuple[str, ...] = ("process",)
"""Options of :func:`memtrials.envs.make_env` itself (the rest are the constructor's)."""


def source(env: str, envs_cfg: Mapping[str, Any]) -> str:
    """``generated`` or ``official``: where ``env``'s task table comes from (``envs.<env>.source``)."""
    if env == "scienceworld":
        return "official"
    if env == "webshop":
        from memtrials.envs.webshop.splits import SOURCE

        return SOURCE
    if env == "planted":
        from memtrials.envs.planted.splits import SOURCE as PLANTED_SOURCE

        return PLANTED_SOURCE
    return str(envs_cfg[env]["source"])


@functools.lru_cache(maxsize=16)
def _read(path: str, stamp: tuple[int, int]) -> Any:
    import pandas as pd

    return pd.read_parquet(path, columns=["split", "type", "source"]).astype(str)


def table_columns(table: Path) -> Any:
    """The ``split``, ``type`` and ``source`` columns of a task table, as strings, read once
    per process while the file is unchanged (every study's checks ask the same tables).
    Callers must not modify the frame."""
    st = table.stat()
    return _read(str(table), (st.st_mtime_ns, st.st_size))


def built_table(env: str, envs_cfg: Mapping[str, Any], tasks_dir: str | Path = "results/tasks") -> Path | None:
    """``<tasks_dir>/<env>.parquet`` when it is built from the configured source (its
    ``source`` column); ``None`` when absent or built from the other source (a table left by
    an earlier config, which the workflow rebuilds: its splits and types say nothing yet)."""
    table = Path(tasks_dir) / f"{env}.parquet"
    if not table.is_file():
        return None
    built = set(table_columns(table)["source"])
    return table if built <= {source(env, envs_cfg)} else None


def allowed_splits(env: str, envs_cfg: Mapping[str, Any]) -> tuple[str, ...]:
    """The split names ``env``'s task table holds under its configured source."""
    if env == "scienceworld":
        return SCIENCEWORLD_SPLITS
    if env == "webshop":
        from memtrials.envs.webshop.splits import SPLITS

        return SPLITS
    if env == "planted":
        from memtrials.envs.planted.splits import SPLITS as PLANTED_SPLITS

        return PLANTED_SPLITS
    if env == "alfworld":
        from memtrials.envs.alfworld.env import OFFICIAL_SPLITS
        from memtrials.envs.alfworld.gen import SPLITS

        return tuple(OFFICIAL_SPLITS) if source(env, envs_cfg) == "official" else SPLITS
    from memtrials.envs.appworld.env import GENERATED_SPLITS, OFFICIAL_SPLITS

    return OFFICIAL_SPLITS if source(env, envs_cfg) == "official" else GENERATED_SPLITS


def env_option_names(env: str) -> tuple[str, ...]:
    """Keyword options ``make_env(env, ...)`` accepts (the constructor's, plus ``process``)."""
    if env == "scienceworld":
        from memtrials.envs.scienceworld.env import ScienceWorldEnv as cls
    elif env == "alfworld":
        from memtrials.envs.alfworld.env import AlfworldEnv as cls  # type: ignore[assignment]
    elif env == "webshop":
        from memtrials.envs.webshop.env import WebShopEnv as cls  # type: ignore[assignment]
    elif env == "planted":
        from memtrials.envs.planted.env import PlantedEnv as cls  # type: ignore[assignment]
    else:
        from memtrials.envs.appworld.env import AppWorldEnv as cls  # type: ignore[assignment]
    return tuple(inspect.signature(cls).parameters) + MAKE_ENV_OPTIONS


def split_size(env: str, split: str | None, envs_cfg: Mapping[str, Any],
               tasks_dir: str | Path = "results/tasks", types: Sequence[str] | None = None
               ) -> tuple[int, str] | None:
    """``(tasks in split, where that count comes from)``, or ``None`` when not known yet;
    with ``types``, only the tasks of those types (for official data, once its table is built).
    Generated data is counted from the config, built table or not: ALFWorld's games from
    ``envs.alfworld.sizes`` (the generator's per-type quotas), the authored AppWorld tasks
    from ``envs.seed``.  A table an earlier config left is rebuilt by the workflow, so the
    configured data is what a run plays, and the count does not depend on what ``results/``
    holds."""
    wanted = None if types is None else {str(t) for t in types}
    if env == "alfworld" and source(env, envs_cfg) == "generated":
        from memtrials.envs.alfworld.gen import type_counts

        sizes = envs_cfg["alfworld"]["sizes"]
        if split is not None and split not in sizes:
            return None
        per_split = type_counts(sizes)
        n = sum(c for s in ([split] if split is not None else sizes) for t, c in per_split.get(str(s), {}).items()
                if wanted is None or t in wanted)
        return int(n), "the generated games, envs.alfworld.sizes"
    if env == "webshop":  # the shipped goals fix the splits
        from memtrials.envs.webshop.splits import task_rows as webshop_rows

        n = sum(1 for r in webshop_rows(envs_cfg["webshop"]["root"], with_capped=False)
                if (split is None or r["split"] == str(split)) and (wanted is None or r["type"] in wanted))
        return int(n), "the shipped WebShop goals (memtrials.envs.webshop.splits)"
    if env == "planted":  # envs.planted.sizes fixes the splits
        from memtrials.envs.planted.splits import split_size as planted_size

        sizes = envs_cfg["planted"]["sizes"]
        if split is not None and str(split) not in sizes:
            return None
        return planted_size(sizes, None if split is None else str(split), types), "envs.planted.sizes"
    if env == "appworld" and source(env, envs_cfg) == "generated":  # the authored set: fixed by envs.seed
        from memtrials.envs.appworld.tasks import task_specs

        n = sum(1 for s in task_specs(int(envs_cfg["seed"]))
                if (split is None or s.split == str(split)) and (wanted is None or s.family in wanted))
        return int(n), "the project-authored AppWorld task set"
    table = built_table(env, envs_cfg, tasks_dir)
    if table is not None:
        df = table_columns(table)
        if wanted is not None:
            df = df[df["type"].isin(wanted)]
        return int(len(df) if split is None else (df["split"] == str(split)).sum()), str(table)
    return None


def known_task_types(env: str, envs_cfg: Mapping[str, Any], tasks_dir: str | Path = "results/tasks"
                     ) -> tuple[tuple[str, ...], str] | None:
    """``(the task types env has, where that list comes from)`` before any job: the
    environment's own list (ScienceWorld's tasks, ALFWorld's six types, the authored AppWorld
    families), else its built task table; ``None`` while unknown (official AppWorld data
    before its task table is built)."""
    if env == "scienceworld":
        from scienceworld.constants import ID2TASK

        return tuple(sorted(ID2TASK.values())), "ScienceWorld's task list (scienceworld.constants)"
    if env == "alfworld":
        from memtrials.envs.alfworld.scenes import TASK_TYPES

        return tuple(sorted(TASK_TYPES)), "ALFWorld's six task types"
    if env == "webshop":
        from memtrials.envs.webshop.splits import task_rows as webshop_rows

        rows = webshop_rows(envs_cfg["webshop"]["root"], with_capped=False)
        return tuple(sorted({r["type"] for r in rows})), "the shipped WebShop goals"
    if env == "planted":
        from memtrials.envs.planted.world import TASK_TYPES

        return tuple(sorted(TASK_TYPES)), "the planted world's task types"
    if env == "appworld" and str(envs_cfg["appworld"]["source"]) == "generated":
        from memtrials.envs.appworld.tasks import task_specs

        families = {s.family for s in task_specs(int(envs_cfg["seed"]))}
        return tuple(sorted(families)), "the project-authored AppWorld task set"
    table = built_table(env, envs_cfg, tasks_dir)
    if table is not None:
        return tuple(sorted(table_columns(table)["type"].unique())), str(table)
    return None


def check_split(env: str, split: Any, envs_cfg: Mapping[str, Any], key: str, *, nullable: bool = False) -> None:
    """Refuse a ``split`` that ``env``'s task table (under its configured source) does not
    hold; ``key`` is the config key that set it."""
    if split is None and nullable:
        return
    allowed = allowed_splits(env, envs_cfg)
    if split is None or str(split) not in allowed:
        null = " (or null: every split)" if nullable else ""
        raise ConfigError(f"config key {key}: unknown split {split!r} for the {source(env, envs_cfg)} {env} data; "
                          f"allowed: {', '.join(allowed)}{null}; set {key} to one of them")


def check_env_options(per_env: Any, key: str, envs: Sequence[str] = ENV_NAMES) -> None:
    """Refuse ``per_env`` (a config key's ``{<env>: {<option>: value}}``) when it is not a
    mapping, names an environment outside ``envs``, or gives an option ``make_env`` does not take."""
    if per_env is None:
        return
    if not isinstance(per_env, Mapping):
        raise ConfigError(f"config key {key}: {per_env!r} is not a mapping; give {{<env>: {{<option>: <value>}}}}")
    unknown = sorted(set(per_env) - set(envs))
    if unknown:
        raise ConfigError(f"config key {key}: unknown environment(s) {unknown}; allowed: {', '.join(envs)}; "
                          "remove or rename the entry")
    for env, options in per_env.items():
        if options is not None and not isinstance(options, Mapping):
            raise ConfigError(f"config key {key}.{env}: {options!r} is not a mapping of option names to values")
        names = env_option_names(env)
        bad = sorted(set(options or {}) - set(names))
        if bad:
            raise ConfigError(f"config key {key}.{env}: unknown option(s) {bad}; allowed: {', '.join(names)} "
                              f"(keyword options of memtrials.envs.make_env('{env}', ...)); remove or rename them")


def check_task_count(env: str, split: str | None, n: Any, envs_cfg: Mapping[str, Any], key: str, fix: str,
                     tasks_dir: str | Path = "results/tasks", types: Sequence[str] | None = None,
                     types_key: str | None = None) -> None:
    """Refuse ``n`` tasks (config key ``key``) from ``env``'s ``split`` when the split is known
    to hold fewer (:func:`split_size`); ``fix`` says what to change; ``types_key`` names the
    config key the ``types`` filter comes from."""
    if isinstance(n, bool) or not isinstance(n, int):
        return  # the shape is the schema's and the study's own check
    known = split_size(env, split, envs_cfg, tasks_dir, types)
    if known is not None and n > known[0]:
        size, where = known
        label = repr(split) if split is not None else "(all splits)"
        of_types = f" tasks of the types in {types_key or 'the task-type filter'}" if types is not None else ""
        raise ConfigError(f"config key {key}: {n} tasks, but the {env} split {label} holds {size}{of_types} "
                          f"({where}); {fix}")
