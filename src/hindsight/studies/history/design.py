"""Design of the history study: conditions, task lists, seeds, actor settings.

*When History Fails to Become Experience*, sections 3-5 and Appendices A, C, D.1, F:
models x environments x conditions x tasks, with identical task lists and seeds across
conditions so that every comparison is paired by task.

A condition name is a view name of :mod:`hindsight.agent.views` (the single history
block, the main format), or ``<view>-chat`` for the same view as user/assistant
messages (Appendix F).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any, Collection, Mapping, Sequence

import pandas as pd

from hindsight.agent.actor import ActorSettings
from hindsight.agent.views import SHUFFLE_MODES, VIEWS
from hindsight.envs.tasks import select_tasks

ENVS: tuple[str, ...] = ("alfworld", "scienceworld", "appworld")
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
TRAINED_CALIBRATORS: frozenset[str] = frozenset()
"""Endpoints serving a calibrator trained by this project's pipeline (section 6.1).  None
exists yet: every endpoint in the calibrator role is an untrained stand-in, and tables and
figures say so (:func:`calibrator_label`)."""
PROBE_CONDITIONS: tuple[str, ...] = ("raw", "causal", "experience")
ACTOR_KEYS = ("mode", "max_actions", "max_output_tokens", "max_listed_actions", "review_max_tokens")


def calibrator_label(endpoints: Sequence[str], trained: Collection[str] = TRAINED_CALIBRATORS) -> str:
    """The Calibrator condition's label: the endpoint(s) that played the role, and whether
    they are the learned calibrator (``trained``: endpoints serving a checkpoint of the
    calibrator's training rule, ``calibrator.rollouts.trained_endpoints``) or an untrained
    stand-in for it."""
    names = sorted({str(e) for e in endpoints if e})
    who = ", ".join(names) or "endpoint not recorded"
    if names and set(names) <= set(trained):
        return f"Calibrator ({who})"
    return f"Calibrator (untrained stand-in: {who})"


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


def episode_seed(base_seed: int, env: str, task_id: str) -> int:
    """The seed of one task's episodes: the same in every condition (paired shuffles)."""
    digest = hashlib.sha256(f"{base_seed}:{env}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1)


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


def read_tasks(path: str | Path, n: int, split: str | None, seed: int, env: str | None = None) -> list[str]:
    """The task list of a history cell (:func:`hindsight.envs.tasks.select_tasks`)."""
    return select_tasks(pd.read_parquet(path), n, split, seed, str(path), fix=too_few_tasks_fix(env))
