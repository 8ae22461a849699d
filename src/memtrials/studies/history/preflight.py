"""Checks of the ``history:`` section against the environments it names, before any job.

``history.splits`` and ``history.env_options`` name things of the environments (a split of
a task table, a keyword of an environment's constructor); ``history.tasks_per_cell`` asks a
split for that many tasks; ``history.task_types`` names task types of the environments;
``history.tasks`` names tasks of the environments' splits.  A mistake in any of them would otherwise surface inside a job,
after other cells had spent calls.  Here each is checked when the workflow is parsed, with
a message naming the key, the allowed values and the fix.

What an environment offers (splits, task types, ``make_env`` options, split sizes) is
:mod:`memtrials.envs.catalog`'s, which every study's checks use.  A split's size is known
before its task table exists for the generated data (the ALFWorld game counts in
``envs.alfworld.sizes``, the authored AppWorld set); for official data it is known once
``results/tasks/{env}.parquet`` has been built (otherwise the cell checks it before its
first call: :func:`memtrials.studies.history.design.read_tasks`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from memtrials.config import ConfigError
from memtrials.envs.catalog import built_table, check_env_options, check_split, known_task_types, source, split_size
from memtrials.envs.tasks import ENV_NAMES
from memtrials.studies.history.design import check_named, filter_types, too_few_tasks_fix


def check_history_envs(h: Mapping[str, Any], envs_cfg: Mapping[str, Any],
                       tasks_dir: str | Path = "results/tasks") -> None:
    """Raise :class:`ConfigError` for an unknown split, an unknown environment option, or a
    split (of the ``history.task_types`` listed, once the table is built) smaller than
    ``history.tasks_per_cell`` (module docstring).  Run after :func:`check_task_types`, which
    checks the type lists this counts with."""
    unknown = sorted(set(h["splits"] or {}) - set(ENV_NAMES))
    if unknown:
        raise ConfigError(f"config key history.splits: unknown environment(s) {unknown}; "
                          f"allowed: {', '.join(ENV_NAMES)}; remove or rename the entry")
    check_env_options(h["env_options"], "history.env_options")
    for env in h["envs"]:
        # present: HistoryWorkflow.check asks for an entry per environment
        check_split(env, h["splits"][env], envs_cfg, f"history.splits.{env}", nullable=True)
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
            fix = too_few_tasks_fix(env if source(env, envs_cfg) != "official" else None)  # official: no "use it"
            raise ConfigError(
                f"config key history.tasks_per_cell: {n} tasks per cell, but the {env} split {label} holds "
                f"{size} tasks{of_types} ({where}); {more}{fix}")


def _check_listed(types: Sequence[str] | None, allowed: Sequence[str], where: str, key: str) -> None:
    """Every listed type is one of ``allowed`` (the environment's types, from ``where``)."""
    import pandas as pd

    filter_types(pd.DataFrame({"type": list(allowed)}), types, where, key)  # the list's shape
    unknown = [t for t in types or () if t not in set(allowed)]
    if unknown:
        raise ValueError(f"config key {key}: unknown task type(s) {unknown} in {where}; allowed: "
                         f"{', '.join(allowed)}; remove them or set {key}: null (every type)")


def _per_env(h: Mapping[str, Any], name: str, value: str, null_means: str) -> list[tuple[str, Any, str]]:
    """``history.<name>``, a mapping of environments to ``value`` or null: (environment, value,
    its key) for each of ``history.envs`` that it gives a value; a ConfigError naming the key
    for anything else or an unknown environment."""
    per_env = h[name] or {}
    if not isinstance(per_env, Mapping):
        raise ConfigError(f"config key history.{name}: {per_env!r} is not a mapping; give "
                          f"{{<env>: {value} | null}} (null: {null_means})")
    unknown_envs = sorted(set(per_env) - set(ENV_NAMES))
    if unknown_envs:
        raise ConfigError(f"config key history.{name}: unknown environment(s) {unknown_envs}; "
                          f"allowed: {', '.join(ENV_NAMES)}; remove or rename the entry")
    return [(env, per_env[env], f"history.{name}.{env}") for env in h["envs"] if per_env.get(env) is not None]


def check_task_types(h: Mapping[str, Any], envs_cfg: Mapping[str, Any],
                     tasks_dir: str | Path = "results/tasks") -> None:
    """Refuse, before any job, a ``history.task_types`` entry for an unknown environment, a
    value that is neither null nor a list of type names, or a type the environment's table
    does not hold (the filtered split's size is :func:`check_history_envs`'s, which runs
    after this check).  Raises :class:`memtrials.config.ConfigError` naming the key, the allowed values
    and the fix; a type list that cannot be known yet is checked by the cell
    (:func:`read_tasks`)."""
    for env, types, key in _per_env(h, "task_types", "[task types]", "every type"):
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
    Raises :class:`memtrials.config.ConfigError` naming the key, the allowed values and the
    fix; what cannot be known yet is checked by the cell (:func:`read_tasks`)."""
    import pandas as pd

    named = _per_env(h, "tasks", "[task ids]", "the seeded draw from history.task_types")
    n = h["tasks_per_cell"]
    n = n if isinstance(n, int) else 1
    for env, tasks, key in named:
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
