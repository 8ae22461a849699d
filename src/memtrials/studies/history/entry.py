"""Entry points of the history study's rules, one per rule, with keyword arguments (called
by the thin workflow scripts): they read the task table / source cells, build the actor
settings from the rule's config slice and run the cell of :mod:`.rollouts`,
:mod:`.continuation` or :mod:`.probe`.  (Was ``cells.py``.)
"""

from __future__ import annotations

from typing import Any, Mapping

from memtrials.seeds import seed_of
from memtrials.studies.history.continuation import continuation_cell
from memtrials.studies.history.design import actor_settings, read_tasks
from memtrials.studies.history.probe import probe_cell
from memtrials.studies.history.rollouts import rollout_cell


def _n_tasks(cell: Mapping[str, Any]) -> int:
    n = cell["tasks_per_cell"]
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"config key history.tasks_per_cell must be a positive integer, got {n!r}")
    return n


async def rollouts(config: Mapping[str, Any], model: str, env: str, condition: str, cell: Mapping[str, Any],
                   actor_prompts_dir: str, tasks_path: str, out_episodes: str, out_steps: str, out_calls: str) -> None:
    """One full-rollout cell: the configured task list of ``env``, paired seeds."""
    tasks = read_tasks(tasks_path, _n_tasks(cell), cell["split"], int(cell["seed"]), env, cell.get("task_types"),
                       cell.get("tasks"))
    if condition.endswith("-chat") and cell["chat_tasks_per_cell"]:  # null: tasks_per_cell
        tasks = tasks[: int(cell["chat_tasks_per_cell"])]  # the first of the same list: still paired
    seeds = [seed_of(int(cell["seed"]), env, t) for t in tasks]
    settings = actor_settings(model, condition, cell["actor"], shuffle=cell["shuffle"])
    await rollout_cell(config, model=model, env=env, condition=condition, tasks=tasks, seeds=seeds,
                       settings=settings, actor_prompts_dir=actor_prompts_dir, in_flight=int(cell["in_flight"]),
                       out_episodes=out_episodes, out_steps=out_steps, out_calls=out_calls,
                       env_options=cell["env_options"])


async def continuation(config: Mapping[str, Any], model: str, env: str, condition: str,
                       cell: Mapping[str, Any], actor_prompts_dir: str, episodes_path: str, steps_path: str,
                       out_episodes: str, out_steps: str, out_calls: str, out_memory: str | None = None) -> None:
    """One reference-continuation cell over the Raw sources of (model, env); a memory
    condition's cell also writes its memory's snapshot to ``out_memory``."""
    cont = cell["continuation"]
    settings = actor_settings(model, "raw", cell["actor"])
    calibrator = (cell.get("calibrator") or {}).get("name")
    await continuation_cell(
        config, model=model, env=env, condition=condition, episodes_path=episodes_path, steps_path=steps_path,
        n_sources=int(cont["sources_per_cell"]), seed=int(cell["seed"]), settings=settings,
        actor_prompts_dir=actor_prompts_dir, in_flight=int(cell["in_flight"]), out_episodes=out_episodes,
        out_steps=out_steps, out_calls=out_calls, calibrator=calibrator,
        min_length=int(cont["min_source_steps"]), env_options=cell["env_options"], memory=cell.get("memory"),
        embedder=(cell.get("embedder") or {}).get("name"), out_memory=out_memory)


async def probe(config: Mapping[str, Any], model: str, env: str, cell: Mapping[str, Any], actor_prompts_dir: str,
                prompts_dir: str, episodes_path: str, steps_path: str, out_responses: str, out_screen: str,
                out_calls: str) -> None:
    """The repetition probe of one Raw cell, screened by the judge role's endpoint."""
    judge = (cell.get("judge") or {}).get("name")
    if not judge:
        raise ValueError("the repetition probe needs roles.judge in the config")
    settings = actor_settings(model, "raw", cell["actor"])
    await probe_cell(config, model=model, judge=judge, env=env, episodes_path=episodes_path, steps_path=steps_path,
                     settings=settings, actor_prompts_dir=actor_prompts_dir, prompts_dir=prompts_dir,
                     out_responses=out_responses, out_screen=out_screen,
                     out_calls=out_calls, conditions=tuple(cell["probe"]["conditions"]))
