"""The playbook study's episode tables and served lessons: columns, lesson views, scores.

Every job of the study plays its episodes through the one runner of
:func:`memtrials.agent.job.open_job` (pool, client, runner; the pool sized to
``min(in_flight, episodes)``): concurrently up to ``in_flight`` (practice rounds,
candidate scoring, evaluation: each episode against its own served lessons) or as a
stream of batches (growth).  Episode tables carry :data:`.records.EPISODE_COLUMNS`.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.agent.records import STEP_SCHEMA
from memtrials.agent.runner import episode_schema, write_episodes
from memtrials.memory.ace import SECTIONS, serving_block
from memtrials.memory.base import FixedView, Lesson, MemoryBlock
from memtrials.studies.playbook.records import EPISODE_COLUMNS, score  # noqa: F401  (score: the study's episode score)

TITLE = "Playbook"


def columns(**values: Any) -> dict[str, Any]:
    """The study's episode columns, unset ones null."""
    unknown = set(values) - {f.name for f in EPISODE_COLUMNS}
    if unknown:
        raise ValueError(f"unknown episode columns {sorted(unknown)}")
    return {f.name: values.get(f.name) for f in EPISODE_COLUMNS}


def block_of(lessons: Sequence[Lesson], grouped: bool = False) -> MemoryBlock | None:
    """The block serving ``lessons`` (playbook order): ACE's one rendering
    (:func:`memtrials.memory.ace.serving_block`), grouped by section with headers when ``grouped``
    and every lesson carries one of ACE's sections, as growth served them; else a flat list."""
    if not lessons:
        return None
    ace = grouped and all(x.section in SECTIONS for x in lessons)
    return serving_block(list(lessons), TITLE, ace)


def view_of(lessons: pd.DataFrame | Sequence[Mapping[str, Any]], grouped: bool = False) -> FixedView:
    """A view serving ``lessons`` (rows with ``lesson_id``, ``text`` and, optionally, ``section``, in
    playbook order), no tags, rendered by :func:`block_of`."""
    rows = lessons.to_dict("records") if isinstance(lessons, pd.DataFrame) else list(lessons)
    return FixedView(block_of([Lesson(str(r["lesson_id"]), str(r["text"]), r.get("section")) for r in rows], grouped))


def write(episodes: Sequence[Any], model: str, env: str, condition: str, out_episodes: str,
          out_steps: str) -> pd.DataFrame:
    """The episode and step tables (tasks indexed in order of first appearance)."""
    index: dict[str, int] = {}
    for ep in episodes:
        index.setdefault(ep.summary["task_id"], len(index))
    return write_episodes(episodes, {"model": model, "env": env, "condition": condition}, index,
                          out_episodes, out_steps, schema=episode_schema(EPISODE_COLUMNS),
                          step_schema=episode_schema((), STEP_SCHEMA))


def served_ids(steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lesson ids shown at an episode's first step."""
    return json.loads(steps[0]["memory_ids"]) if steps else []
