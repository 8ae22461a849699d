"""Playing a job's episodes and writing them: pool, client, runner, tables, call counts.

Every job plays through the one runner (:class:`memtrials.agent.runner.Runner`): a
training stream (``Runner.stream``, batches of ``B`` sharing a snapshot) or an evaluation
(``Runner.concurrent`` against the frozen memory).  Episode tables carry the runner's
columns, :data:`STUDY_COLUMNS` and the columns the design's memory declares.

LLM calls are counted per episode for every design (the paper's call count: synthesis
plus execution): ``execution_calls`` are the actor's calls (one per step),
``synthesis_calls`` the memory's chat calls attributed to the episode, at serving (a
memory's declared ``synthesis_calls`` column) plus at learning (a memory's
``update_calls``, by episode id).  Embedding calls are not LLM calls and are counted apart
(:func:`call_counts`, per job, from the call records).
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable, Mapping, Sequence

import pandas as pd
import pyarrow as pa

from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.records import STEP_SCHEMA
from memtrials.agent.runner import Runner, episode_schema, write_episodes
from memtrials.envs.pool import EnvPool, env_factory
from memtrials.llm import open_client

STUDY_COLUMNS: tuple[pa.Field, ...] = (
    pa.field("design", pa.string()),
    pa.field("seed_index", pa.int64()),
    pa.field("phase", pa.string()),            # train | eval
    pa.field("round", pa.int64()),             # 1.. in training; 0 at evaluation
    pa.field("position", pa.int64()),          # index of the task within its round (or the evaluation)
    pa.field("execution_calls", pa.int64()),
    pa.field("synthesis_calls_total", pa.int64()),
    pa.field("llm_calls", pa.int64()),
)


@asynccontextmanager
async def job(config: Mapping[str, Any], cell_id: str, env: str, env_options: Mapping[str, Any],
              actor_prompts_dir: str, in_flight: int, out_calls: str,
              make_env: Callable[[], Any] | None = None) -> AsyncIterator[tuple[Runner, Any]]:
    """A runner over an environment pool of ``in_flight`` environments and a recording client."""
    async with EnvPool(make_env or env_factory(env, env_options), max(1, int(in_flight))) as pool, \
            open_client(config, cell_id, out_calls) as client:
        yield Runner(client, pool, ActorPrompts.load(actor_prompts_dir), in_flight=int(in_flight)), client


def count_calls(episodes: Sequence[Any], update_calls: Mapping[str, int]) -> None:
    """Add the per-episode call counts (module docstring) to each episode's summary."""
    for ep in episodes:
        s = ep.summary
        served = int(s.get("synthesis_calls") or 0)
        s["execution_calls"] = sum(1 for st in ep.steps if st.get("call_id"))
        s["synthesis_calls_total"] = served + int(update_calls.get(str(s["episode_id"]), 0))
        s["llm_calls"] = s["execution_calls"] + s["synthesis_calls_total"]


def write(episodes: Sequence[Any], view: Any, model: str, env: str, design: str, out_episodes: str,
          out_steps: str) -> pd.DataFrame:
    """The episode and step tables (tasks indexed in order of first appearance)."""
    index: dict[str, int] = {}
    for ep in episodes:
        index.setdefault(ep.summary["task_id"], len(index))
    extra = (*STUDY_COLUMNS, *getattr(view, "episode_columns", ()))
    return write_episodes(episodes, {"model": model, "env": env, "condition": design}, index, out_episodes,
                          out_steps, schema=episode_schema(extra),
                          step_schema=episode_schema(getattr(view, "step_columns", ()), STEP_SCHEMA))


def parse_failures(state: Any) -> int:
    """Synthesis replies a memory could not use, recorded in its state's ``rejected`` lists
    (every memory keeps one; a joint memory one per store)."""
    if isinstance(state, Mapping):
        return sum(len(v) if k == "rejected" and isinstance(v, list) else parse_failures(v) for k, v in state.items())
    if isinstance(state, list):
        return sum(parse_failures(v) for v in state)
    return 0


def call_counts(calls: pd.DataFrame, embedder: str) -> dict[str, Any]:
    """Chat calls per purpose (``actor`` is execution, any other purpose synthesis) and
    embedding texts, from a job's call records."""
    chat = calls[calls["endpoint"] != embedder]
    by = {str(p): int(n) for p, n in chat.groupby("purpose").size().items()}
    return {"by_purpose": by, "execution": by.get("actor", 0),
            "synthesis": sum(n for p, n in by.items() if p != "actor"),
            "embedding_texts": int((calls["endpoint"] == embedder).sum())}
