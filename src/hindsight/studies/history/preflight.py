"""Checks of the ``history:`` section against the environments it names, before any job.

``history.splits`` and ``history.env_options`` name things of the environments (a split of
a task table, a keyword of an environment's constructor); ``history.tasks_per_cell`` asks a
split for that many tasks; ``history.task_types`` names task types of the environments;
``history.tasks`` names tasks of the environments' splits.  A mistake in any of them would otherwise surface inside a job,
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
from typing import Any, Mapping, Sequence

from hindsight.config import ConfigError
from hindsight.envs.tasks import ENV_NAMES
from hindsight.studies.history.design import check_named, filter_types, too_few_tasks_fix

SCIENCEWORLD_SPLITS: tuple[str, ...] = ("train", "dev", "test")
MAKE_ENV_OPTIONS: tuple[str, ...] = ("process",)
"""Options of :func:`hindsight.envs.make_env` itself (the rest are the constructor's)."""


def source(env: str, envs_cfg: Mapping[str, Any]) -> str:
    """``generated`` or ``official``: where ``env``'s task table comes from (``envs.<env>.source``)."""
    if env == "scienceworld":
        return "official"
    return str(envs_cfg[env]["source"])


def built_table(env: str, envs_cfg: Mapping[str, Any], tasks_dir: str | Path = "results/tasks") -> Path | None:
    """``<tasks_dir>/<env>.parquet`` when it is built from the configured source (its
    ``source`` column); ``None`` when absent or built from the other source (a table left by
    an earlier config, which the workflow rebuilds: its splits and types say nothing yet)."""
    table = Path(tasks_dir) / f"{env}.parquet"
    if not table.is_file():
        return None
    import pandas as pd

    built = set(pd.read_parquet(table, columns=["source"])["source"].astype(str))
    return table if built <= {source(env, envs_cfg)} else None


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
               tasks_dir: str | Path = "results/tasks", types: Sequence[str] | None = None
               ) -> tuple[int, str] | None:
    """``(tasks in split, where that count comes from)``, or ``None`` when not known yet;
    with ``types``, only the tasks of those types (known once the task table is built)."""
    table = built_table(env, envs_cfg, tasks_dir)
    if table is not None:
        import pandas as pd

        df = pd.read_parquet(table, columns=["split", "type"] if types is not None else ["split"])
        if types is not None:
            df = df[df["type"].astype(str).isin([str(t) for t in types])]
        return int(len(df) if split is None else (df["split"].astype(str) == str(split)).sum()), str(table)
    if split is None or types is not None or source(env, envs_cfg) != "generated":
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
    split (of the ``history.task_types`` listed, once the table is built) smaller than
    ``history.tasks_per_cell`` (module docstring).  Run after :func:`check_task_types`, which
    checks the type lists this counts with."""
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
    n, chosen, named = h["tasks_per_cell"], h["task_types"] or {}, h["tasks"] or {}
    for env in h["envs"]:
        if named.get(env) is not None:  # the named tasks' count: check_named_tasks
            continue
        split, types = h["splits"][env], chosen.get(env)
        known = split_size(env, split, envs_cfg, tasks_dir, types)
        if known is not None and isinstance(n, int) and n > known[0]:
            size, where = known
            label = repr(split) if split is not None else "(all splits)"
            key = f"history.task_types.{env}"
            of_types, more = ((f" of the types in {key}", f"list more types in {key} (or null), ")
                              if types is not None else ("", ""))
            raise ConfigError(
                f"config key history.tasks_per_cell: {n} tasks per cell, but the {env} split {label} holds "
                f"{size} tasks{of_types} ({where}); {more}{too_few_tasks_fix(env)}")


def _check_listed(types: Sequence[str] | None, allowed: Sequence[str], where: str, key: str) -> None:
    """Every listed type is one of ``allowed`` (the environment's types, from ``where``)."""
    import pandas as pd

    filter_types(pd.DataFrame({"type": list(allowed)}), types, where, key)  # the list's shape
    unknown = [t for t in types or () if t not in set(allowed)]
    if unknown:
        raise ValueError(f"config key {key}: unknown task type(s) {unknown} in {where}; allowed: "
                         f"{', '.join(allowed)}; remove them or set {key}: null (every type)")


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
        from hindsight.envs.alfworld_scenes import TASK_TYPES

        return tuple(sorted(TASK_TYPES)), "ALFWorld's six task types"
    if env == "appworld" and str(envs_cfg["appworld"]["source"]) == "generated":
        from hindsight.envs.appworld_tasks import task_specs

        families = {s.family for s in task_specs(int(envs_cfg["seed"]))}
        return tuple(sorted(families)), "the project-authored AppWorld task set"
    table = built_table(env, envs_cfg, tasks_dir)
    if table is not None:
        import pandas as pd

        col = pd.read_parquet(table, columns=["type"])["type"].astype(str)
        return tuple(sorted(col.unique())), str(table)
    return None


def _per_env(h: Mapping[str, Any], name: str, value: str, null_means: str) -> Mapping[str, Any]:
    """``history.<name>``, a mapping of environments to ``value`` or null; a ConfigError naming
    the key for anything else or an unknown environment."""
    per_env = h[name] or {}
    if not isinstance(per_env, Mapping):
        raise ConfigError(f"config key history.{name}: {per_env!r} is not a mapping; give "
                          f"{{<env>: {value} | null}} (null: {null_means})")
    unknown_envs = sorted(set(per_env) - set(ENV_NAMES))
    if unknown_envs:
        raise ConfigError(f"config key history.{name}: unknown environment(s) {unknown_envs}; "
                          f"allowed: {', '.join(ENV_NAMES)}; remove or rename the entry")
    return per_env


def check_task_types(h: Mapping[str, Any], envs_cfg: Mapping[str, Any],
                     tasks_dir: str | Path = "results/tasks") -> None:
    """Refuse, before any job, a ``history.task_types`` entry for an unknown environment, a
    value that is neither null nor a list of type names, or a type the environment's table
    does not hold (the filtered split's size is :func:`check_history_envs`'s, which runs
    after this check).  Raises :class:`hindsight.config.ConfigError` naming the key, the allowed values
    and the fix; a type list that cannot be known yet is checked by the cell
    (:func:`read_tasks`)."""
    chosen = _per_env(h, "task_types", "[task types]", "every type")
    for env in h["envs"]:
        types = chosen.get(env)
        if types is None:
            continue
        key = f"history.task_types.{env}"
        known = known_task_types(env, envs_cfg, tasks_dir)
        if known is None:
            continue
        allowed, where = known
        try:
            _check_listed(types, allowed, where, key)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


def check_named_tasks(h: Mapping[str, Any], envs_cfg: Mapping[str, Any],
                      tasks_dir: str | Path = "results/tasks") -> None:
    """Refuse, before any job, a ``history.tasks`` entry for an unknown environment, a value
    that is neither null nor a list of distinct task ids, fewer tasks than
    ``history.tasks_per_cell``, or (once the environment's task table is built from its
    configured source) a task that is not in the table's ``history.splits`` split; before
    the table exists, a ScienceWorld id whose task name is not one of ScienceWorld's tasks.
    Raises :class:`hindsight.config.ConfigError` naming the key, the allowed values and the
    fix; what cannot be known yet is checked by the cell (:func:`read_tasks`)."""
    import pandas as pd

    named = _per_env(h, "tasks", "[task ids]", "the seeded draw from history.task_types")
    n = h["tasks_per_cell"]
    n = n if isinstance(n, int) else 1
    for env in h["envs"]:
        tasks = named.get(env)
        if tasks is None:
            continue
        key = f"history.tasks.{env}"
        table = built_table(env, envs_cfg, tasks_dir)
        if table is not None:
            df = pd.read_parquet(table, columns=["task_id", "split"])
            where = str(table)
        else:  # the shape and the count now; the ids once the table is built (or in the cell)
            df, where = pd.DataFrame({"task_id": list(tasks) if isinstance(tasks, list) else [],
                                      "split": h["splits"][env]}), "(table not built yet)"
        try:
            check_named(tasks, df, n, h["splits"][env], where, key)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        if table is None and env == "scienceworld":
            known = known_task_types(env, envs_cfg, tasks_dir)
            names = set(known[0]) if known else set()
            bad = [t for t in tasks if t.rpartition(":")[0] not in names or not t.rpartition(":")[2].isdigit()]
            if bad:
                raise ConfigError(f"config key {key}: unknown task(s) {bad}; allowed: <task name>:<variation> with "
                                  f"a task name of {known[1] if known else 'ScienceWorld'} ({', '.join(sorted(names)[:4])}, "
                                  f"...) and a variation of split {h['splits'][env]!r}; remove them, or set {key}: null "
                                  "(the seeded draw from history.task_types)")
