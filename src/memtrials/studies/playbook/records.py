"""Declared schemas of the playbook study's Parquet artifacts, and their row builders.

- :data:`PLAYBOOK_SCHEMA`: every pass's playbook of a growth run (one row per lesson and
  pass, playbook order); ACE lessons carry tag counts, Dynamic Cheatsheet entries a usage
  count (a user memory's lessons whichever of them it keeps); ``tokens`` by the declared
  tokenizer (``playbook.tokenizer``).
- :data:`EPISODE_COLUMNS`: the study's columns on the runner's episode table (which
  round an episode belongs to, what it was served).
- :data:`SCORES_SCHEMA`: the candidates' practice scores (what the choice reads).
- :func:`score` / :func:`scores`: an episode's score (success; WebShop's purchase reward).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import pandas as pd
import pyarrow as pa

if TYPE_CHECKING:
    from memtrials.memory.base import PlaybookMemory

PLAYBOOK_SCHEMA = pa.schema([
    pa.field("pass", pa.int64(), nullable=False),  # 1-based pass over the training tasks
    pa.field("position", pa.int64(), nullable=False),  # 0-based place in the playbook
    pa.field("lesson_id", pa.string(), nullable=False),
    pa.field("section", pa.string(), nullable=False),  # ACE section slug; "cheatsheet" for DC; else the kind
    pa.field("text", pa.string(), nullable=False),
    pa.field("tokens", pa.int64(), nullable=False),
    pa.field("helpful", pa.int64()),  # ACE tags (null for DC)
    pa.field("harmful", pa.int64()),
    pa.field("neutral", pa.int64()),
    pa.field("uses", pa.int64()),  # DC usage count (null for ACE)
])
COUNTS = ("helpful", "harmful", "neutral", "uses")
"""The lesson counts the artifact keeps (:attr:`memtrials.memory.base.Lesson.counts`)."""

EPISODE_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("round", pa.string()),  # growth | practice | choice | eval
    pa.field("split", pa.string()),  # the task role: train | practice | eval
    pa.field("candidate", pa.string()),  # what was served (choice / eval); null otherwise
    pa.field("design_episode", pa.int64()),  # index in the practice or choice design
    pa.field("inclusion", pa.string()),  # practice round: z0..z{m-1} as a 0/1 string
    pa.field("served_tokens", pa.int64()),  # lesson tokens served at every step
    pa.field("growth_pass", pa.int64()),  # growth: the pass
)

SCORES_SCHEMA = pa.schema([
    pa.field("candidate", pa.string(), nullable=False),
    pa.field("episode", pa.int64(), nullable=False),
    pa.field("task_id", pa.string(), nullable=False),
    pa.field("episode_id", pa.string(), nullable=False),
    pa.field("split", pa.string(), nullable=False),
    pa.field("score", pa.float64(), nullable=False),  # success in [0, 1]
])


def playbook_rows(memory: "PlaybookMemory", pass_: int, count_tokens: Callable[[str], int]) -> list[dict[str, Any]]:
    """One row per lesson of ``memory``'s playbook (:meth:`~memtrials.memory.base.PlaybookMemory.playbook`:
    ACE's lessons, a cheatsheet's entries, a user memory's lessons) after pass ``pass_``; a
    lesson without a section is filed under the memory's ``kind``, counts it does not keep
    are null."""
    return [{"pass": pass_, "position": k, "lesson_id": x.id, "section": x.section or memory.kind, "text": x.text,
             "tokens": count_tokens(x.text), **{c: x.counts.get(c) for c in COUNTS}}
            for k, x in enumerate(memory.playbook())]


def playbook_frame(rows: Sequence[dict[str, Any]]) -> pd.DataFrame:
    return pa.Table.from_pylist(list(rows), schema=PLAYBOOK_SCHEMA).to_pandas()


def final_playbook(path: str | Path) -> pd.DataFrame:
    """The last pass's playbook of a growth run (playbook order)."""
    df = pd.read_parquet(path)
    missing = set(PLAYBOOK_SCHEMA.names) - set(df.columns)
    if missing:
        raise ValueError(f"{path}: not a playbook artifact (missing columns {sorted(missing)}); rebuild it")
    if df.empty:
        return df
    last = df[df["pass"] == df["pass"].max()]
    return last.sort_values("position").reset_index(drop=True)


REWARD_SCORED: frozenset[str] = frozenset({"webshop"})
"""Benchmarks scored by the environment's reward in [0, 1] instead of task completion
(section 2: WebShop is scored by purchase reward; its ``final_score`` is the reward of the
purchase, 0 without one).  Every other benchmark scores 1 when the task is completed."""


def score(summary: Mapping[str, Any], env: str) -> float:
    """An episode's score in [0, 1] on ``env``: task completion (ALFWorld success, AppWorld
    pass), or the purchase reward on WebShop (:data:`REWARD_SCORED`)."""
    if env in REWARD_SCORED:
        return float(summary["final_score"])
    return 1.0 if summary["won"] else 0.0


SCORE_COLUMNS = ("env", "won", "final_score")
"""The episode-table columns :func:`scores` reads."""


def scores(episodes: pd.DataFrame) -> pd.Series:
    """:func:`score` of every row of an episode table (its ``env``, ``won``, ``final_score``;
    a table without an ``env`` column, e.g. a unit test's, is scored by success)."""
    won = episodes["won"].astype(float)
    if "env" not in episodes.columns:
        return won
    reward = episodes["env"].astype(str).isin(REWARD_SCORED)
    if not reward.any():
        return won
    return episodes["final_score"].astype(float).where(reward, won)
