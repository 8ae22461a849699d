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
from typing import Any, Mapping

import pandas as pd

from hindsight.agent.actor import ActorSettings
from hindsight.agent.views import VIEWS
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
PROBE_CONDITIONS: tuple[str, ...] = ("raw", "causal", "experience")
ACTOR_KEYS = ("mode", "max_actions", "max_output_tokens", "max_listed_actions", "review_max_tokens")


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
                   review_model: str | None = None) -> ActorSettings:
    """The actor of one rollout cell: the view and format from the condition, the rest from config."""
    unknown = sorted(set(actor) - set(ACTOR_KEYS))
    if unknown:
        raise ValueError(f"history.actor: unknown key(s) {unknown}; allowed: {', '.join(ACTOR_KEYS)}")
    view, fmt = parse_condition(condition)
    return ActorSettings(model=model, view=view, fmt=fmt, review=view == "experience",
                         reminder=view == "check", review_model=review_model, **dict(actor))


def episode_seed(base_seed: int, env: str, task_id: str) -> int:
    """The seed of one task's episodes: the same in every condition (paired shuffles)."""
    digest = hashlib.sha256(f"{base_seed}:{env}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 1)


def read_tasks(path: str | Path, n: int, split: str | None, seed: int) -> list[str]:
    """The task list of a history cell (:func:`hindsight.envs.tasks.select_tasks`)."""
    return select_tasks(pd.read_parquet(path), n, split, seed, str(path),
                        fix="set history.tasks_per_cell to at most that, or name a larger split "
                            "in history.splits")
