"""Design of the history study: conditions, task lists, actor settings.

*When History Fails to Become Experience*, sections 3-5 and Appendices A, C, D.1, F:
models x environments x conditions x tasks, with identical task lists and seeds across
conditions so that every comparison is paired by task (a task's episodes are seeded by
``memtrials.seeds.seed_of(cell seed, env, task_id)`` in every condition: paired shuffles).

A condition name is a view name of :mod:`memtrials.agent.views` (the single history
block, the main format), or ``<view>-chat`` for the same view as user/assistant
messages (Appendix F).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.agent.actor import ActorSettings
from memtrials.agent.views import SHUFFLE_MODES, VIEWS
from memtrials.envs.tasks import select_tasks

ENVS: tuple[str, ...] = ("alfworld", "scienceworld", "appworld", "webshop")
CONDITION_LABELS: dict[str, str] = {
    "raw": "Raw", "recent3": "Recent-3-Only", "obsonly": "Observation-Only",
    "shuffle_all": "Shuffle-All", "shuffle_old": "Shuffle-Old", "causal": "Causal",
    "experience": "Experience", "check": "Check",
}
CONTINUATION_CONDITIONS: tuple[str, ...] = ("raw", "reference", "causal_reference", "experience", "calibrator")
CONTINUATION_LABELS: dict[str, str] = {
    "raw": "Raw", "reference": "Reference", "causal_reference": "Causal + Reference",
    "experience": "Experience", "calibrator": "Calibrator",
}
PROBE_CONDITIONS: tuple[str, ...] = ("raw", "causal", "experience")
ACTOR_KEYS = ("mode", "max_actions", "max_output_tokens", "max_listed_actions", "listing", "review_max_tokens")


def parse_condition(condition: str) -> tuple[str, str]:
    """``"causal-chat"`` -> ``("causal", "chat")``; ``"raw"`` -> ``("raw", "block")``."""
    view, sep, fmt = condition.partition("-")
    fmt = fmt if sep else "block"
    if view not in VIEWS or fmt not in ("block", "chat"):
        raise ValueError(
            f"unknown history condition {condition!r}: use a view ({', '.join(VIEWS)}) "
            "optionally followed by '-chat'"
        )
    return view, fmt


def rollout_conditions(cfg: Mapping[str, Any]) -> list[str]:
    """Block-format conditions, then the chat-format ones (``history.chat_conditions``)."""
    conds = list(cfg["conditions"])
    conds += [f"{c}-chat" for c in cfg["chat_conditions"]]
    for c in conds:
        parse_condition(c)
    return conds


def actor_settings(model: str, condition: str, actor: Mapping[str, Any],
                   review_model: str | None = None, shuffle: str = "per_step") -> ActorSettings:
    """The actor of one rollout cell: the view and format from the condition, the rest from
    config (``shuffle``: ``history.shuffle``, the shuffles' draw, :data:`SHUFFLE_MODES`)."""
    unknown = sorted(set(actor) - set(ACTOR_KEYS))
    if unknown:
        raise ValueError(f"history.actor: unknown key(s) {unknown}; allowed: {', '.join(ACTOR_KEYS)}")
    if shuffle not in SHUFFLE_MODES:
        raise ValueError(f"config key history.shuffle: {shuffle!r} is not one of {', '.join(SHUFFLE_MODES)}")
    view, fmt = parse_condition(condition)
    return ActorSettings(model=model, view=view, fmt=fmt, review=view == "experience",
                         reminder=view == "check", review_model=review_model, shuffle=shuffle, **dict(actor))


OFFICIAL_DATA_FIX: dict[str, str] = {
    "alfworld": "or use the official ALFWorld data: set ALFWORLD_DATA to the folder where `alfworld-download` "
                "put it, envs.alfworld.source: official, and a split that holds enough tasks in history.splits",
    "appworld": "or use the official AppWorld data: set APPWORLD_ROOT to the folder where `appworld download "
                "data` put it, envs.appworld.source: official, and a split that holds enough tasks in "
                "history.splits",
}
"""The second half of a too-small-split message: where more tasks come from."""


def too_few_tasks_fix(env: str | None) -> str:
    """What to do when a split holds fewer tasks than ``history.tasks_per_cell`` asks."""
    extra = OFFICIAL_DATA_FIX[env] if env in OFFICIAL_DATA_FIX else "or name a larger split in history.splits"
    return f"set history.tasks_per_cell to at most that, {extra}"


def filter_types(tasks: pd.DataFrame, types: Sequence[str] | None, source: str,
                 key: str = "history.task_types") -> pd.DataFrame:
    """The rows of ``tasks`` whose type is one of ``types`` (``None``: every row).

    Applied before :func:`memtrials.envs.tasks.select_tasks`, so the seed orders the chosen
    types' tasks as it would the whole table's.  A listed type the table lacks contributes
    no task (the types an environment has are checked before the first job,
    :func:`memtrials.studies.history.preflight.check_task_types`); a list none of whose types the table holds is an error naming
    ``key`` (e.g. ``history.task_types.alfworld``), the table's types and the fix.
    """
    if types is None:
        return tasks
    if isinstance(types, str) or not all(isinstance(t, str) for t in types) or not types:
        raise ValueError(f"config key {key}: {types!r} is not a non-empty list of task types; "
                         "give a list such as [pick_and_place_simple] or null (every type)")
    present = sorted(tasks["type"].astype(str).unique())
    if not set(types) & set(present):
        raise ValueError(f"config key {key}: unknown task type(s) {list(types)} in {source}; allowed: "
                         f"{', '.join(present)}; remove them or set {key}: null (every type)")
    return tasks[tasks["type"].astype(str).isin(list(types))]


def check_named(named: Any, tasks: pd.DataFrame, n: int, split: str | None, source: str,
                key: str = "history.tasks") -> list[str]:
    """``named`` (``history.tasks`` of one environment) checked against the task table
    ``tasks`` (read from ``source``): a non-empty list of distinct task ids, each a task of
    ``split`` (``None``: any split), at least ``n`` of them (``history.tasks_per_cell``).
    Returns the first ``n``, in the list's order.  Errors (``ValueError``) name ``key``, the
    allowed values and the fix."""
    if isinstance(named, str) or not isinstance(named, Sequence) or not named \
            or not all(isinstance(t, str) and t for t in named):
        raise ValueError(f"config key {key}: {named!r} is not a non-empty list of task ids; give a list "
                         "such as [find-non-living-thing:286] or null (the seeded draw from history.task_types)")
    dup = sorted({t for t in named if list(named).count(t) > 1})
    if dup:
        raise ValueError(f"config key {key}: task(s) {dup} listed more than once; list each task once")
    ids = tasks["task_id"].astype(str)
    pool = ids if split is None else ids[tasks["split"].astype(str) == str(split)]
    label = "(all splits)" if split is None else f"split {split!r}"
    unknown = [t for t in named if t not in set(pool)]
    if unknown:
        other = [t for t in unknown if t in set(ids)]
        where = f" ({', '.join(other)}: in another split)" if other else ""
        sample = ", ".join(sorted(pool)[:5])
        raise ValueError(f"config key {key}: unknown task(s) {unknown}{where}; allowed: the {len(pool)} task ids "
                         f"of {label} in {source} (e.g. {sample}); remove them, or set {key}: null "
                         "(the seeded draw from history.task_types)")
    if n > len(named):
        raise ValueError(f"config key history.tasks_per_cell: {n} tasks per cell, but {key} names {len(named)}; "
                         f"name at least {n} tasks there, set it to null (the seeded draw), or set "
                         f"history.tasks_per_cell to at most {len(named)}")
    return [str(t) for t in named[:n]]


def read_tasks(path: str | Path, n: int, split: str | None, seed: int, env: str | None = None,
               types: Sequence[str] | None = None, named: Sequence[str] | None = None) -> list[str]:
    """The task list of a history cell: with ``named`` (``history.tasks`` of ``env``), the
    first ``n`` of those tasks in their order (:func:`check_named`); otherwise the table's
    rows of ``types`` (``history.task_types`` of ``env``; ``None``: every type,
    :func:`filter_types`), then :func:`memtrials.envs.tasks.select_tasks`."""
    if named is not None:
        return check_named(named, pd.read_parquet(path), n, split, str(path),
                           f"history.tasks.{env}" if env else "history.tasks")
    key = f"history.task_types.{env}" if env else "history.task_types"
    tasks = filter_types(pd.read_parquet(path), types, str(path), key)
    fix = too_few_tasks_fix(env) if types is None else f"list more types in {key} (or null), {too_few_tasks_fix(env)}"
    return select_tasks(tasks, n, split, seed, str(path), fix=fix)
