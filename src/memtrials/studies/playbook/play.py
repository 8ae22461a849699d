"""Playing a job's episodes: the environment pool, the client, the runner, the tables.

Every job of the study plays its episodes through the one runner
(:class:`memtrials.agent.runner.Runner`): concurrently up to ``in_flight`` (practice
rounds, candidate scoring, evaluation: each episode against its own served lessons) or as
a stream of batches (growth).  Episode tables carry :data:`.records.EPISODE_COLUMNS`.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Mapping, Sequence

import pandas as pd

from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.records import STEP_SCHEMA
from memtrials.agent.runner import Runner, episode_schema, write_episodes
from memtrials.envs.pool import EnvPool, env_factory
from memtrials.llm import open_client
from memtrials.memory.base import FixedView, Lesson, MemoryBlock
from memtrials.studies.playbook.records import EPISODE_COLUMNS

TITLE = "Playbook"


def columns(**values: Any) -> dict[str, Any]:
    """The study's episode columns, unset ones null."""
    unknown = set(values) - {f.name for f in EPISODE_COLUMNS}
    if unknown:
        raise ValueError(f"unknown episode columns {sorted(unknown)}")
    return {f.name: values.get(f.name) for f in EPISODE_COLUMNS}


def view_of(lessons: pd.DataFrame | Sequence[Mapping[str, Any]]) -> FixedView:
    """A view serving ``lessons`` (rows with ``lesson_id`` and ``text``, in playbook order), no tags."""
    rows = lessons.to_dict("records") if isinstance(lessons, pd.DataFrame) else list(lessons)
    if not rows:
        return FixedView(None)
    return FixedView(MemoryBlock(tuple(Lesson(str(r["lesson_id"]), str(r["text"])) for r in rows), TITLE))


@asynccontextmanager
async def job(config: Mapping[str, Any], cell_id: str, env: str, env_options: Mapping[str, Any],
              actor_prompts_dir: str, in_flight: int, n_episodes: int, out_calls: str,
              make_env: Callable[[], Any] | None = None) -> AsyncIterator[tuple[Runner, Any]]:
    """A runner over an environment pool of ``min(in_flight, n_episodes)`` and a recording client."""
    size = max(1, min(int(in_flight), max(1, n_episodes)))
    async with EnvPool(make_env or env_factory(env, env_options), size) as pool, \
            open_client(config, cell_id, out_calls) as client:
        yield Runner(client, pool, ActorPrompts.load(actor_prompts_dir), in_flight=int(in_flight)), client


def write(episodes: Sequence[Any], model: str, env: str, condition: str, out_episodes: str,
          out_steps: str) -> pd.DataFrame:
    """The episode and step tables (tasks indexed in order of first appearance)."""
    index: dict[str, int] = {}
    for ep in episodes:
        index.setdefault(ep.summary["task_id"], len(index))
    return write_episodes(episodes, {"model": model, "env": env, "condition": condition}, index,
                          out_episodes, out_steps, schema=episode_schema(EPISODE_COLUMNS),
                          step_schema=episode_schema((), STEP_SCHEMA))


def score(summary: Mapping[str, Any]) -> float:
    """An episode's success in [0, 1]: task completion (ALFWorld success, AppWorld pass)."""
    return 1.0 if summary["won"] else 0.0


def served_ids(steps: Sequence[Mapping[str, Any]]) -> list[str]:
    """The lesson ids shown at an episode's first step."""
    return json.loads(steps[0]["memory_ids"]) if steps else []
