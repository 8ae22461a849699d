"""Full-rollout cells: one (model, environment, condition) cell runs all its tasks.

*When History Fails to Become Experience*, section 4, section 5 and Appendices C, D.1,
D.3, F.1.  Episodes of a cell run concurrently through the one runner
(:class:`memtrials.agent.runner.Runner`, ``in_flight`` at a time, one environment object
each); the model client bounds the requests in flight, caches every call and records it,
so a killed cell rerun repeats no completed call and writes the same Parquet.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import pandas as pd

from memtrials.agent.actor import ActorSettings, Composer
from memtrials.agent.job import open_job
from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.records import STEP_SCHEMA
from memtrials.agent.runner import EpisodeSpec, episode_schema, write_episodes
from memtrials.agent.spill import StepSpill

if TYPE_CHECKING:
    from memtrials.memory.base import MemoryView

log = logging.getLogger(__name__)


async def rollout_cell(
    config: Mapping[str, Any], *, model: str, env: str, condition: str, tasks: Sequence[str],
    seeds: Sequence[int], settings: ActorSettings, actor_prompts_dir: str, in_flight: int,
    out_episodes: str, out_steps: str, out_calls: str, env_options: Mapping[str, Any] | None = None,
    make_env: Callable[[], Any] | None = None, composer: Callable[[int], Composer] | None = None,
    memory: MemoryView | None = None,
) -> pd.DataFrame:
    """Run one full-rollout cell and write its episodes, steps and call records.

    ``memory`` (a :class:`~memtrials.memory.MemoryView`) puts a memory block in every
    actor prompt; the lesson ids of each step are recorded.
    """
    if len(tasks) != len(seeds):
        raise ValueError(f"{len(tasks)} tasks but {len(seeds)} seeds")
    if len(set(tasks)) != len(tasks):
        raise ValueError("rollout cell: the task list has duplicates")
    prompts = ActorPrompts.load(actor_prompts_dir)
    cell = f"history/rollouts/{model}/{env}/{condition}"
    specs = [EpisodeSpec(env, t, f"{cell}/{t}", s, settings, composer=composer(s) if composer else None)
             for t, s in zip(tasks, seeds)]
    # finished episodes' steps wait on disk, not in memory (flat in the cell's episodes)
    with StepSpill(Path(out_steps).parent) as spill:
        async with open_job(config, cell, out_calls, prompts, env=env, in_flight=in_flight, episodes=len(tasks),
                            env_options=env_options, make_env=make_env) as (runner, client):
            client.expect(len(tasks) * settings.max_actions * (2 if settings.review else 1))
            episodes = await runner.concurrent(specs, memory, spill)
            log.info("%s: %d episodes, %d won; %d fresh calls, %d from cache", cell, len(episodes),
                     sum(e.summary["won"] for e in episodes), client.fresh_calls, client.cache_hits)
        return write_episodes(episodes, {"model": model, "env": env, "condition": condition},
                              {t: i for i, t in enumerate(tasks)}, out_episodes, out_steps,
                              schema=episode_schema(getattr(memory, "episode_columns", ())),
                              step_schema=episode_schema(getattr(memory, "step_columns", ()), STEP_SCHEMA))
