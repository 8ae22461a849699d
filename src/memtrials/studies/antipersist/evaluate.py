"""One held-out evaluation: the trained memory, frozen, on the evaluation pool.

One job per (design, model, benchmark, seed).  The training stream's final snapshot is
restored into a fresh memory of the design, and every evaluation task is played
concurrently (:meth:`memtrials.agent.runner.Runner.concurrent`) against ``memory.frozen()``:
no update is ever called, so the evaluation's episodes never reach the memory, and the
memory's digest after the run must equal the snapshot's (checked; a design that changed
while serving fails the job).  Per-task guidance a design builds at serving (the
anti-persistence modes) is synthesized and dropped as in training; its calls are counted.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Mapping


from memtrials.agent.job import open_job
from memtrials.agent.runner import EpisodeSpec
from memtrials.io import atomic_write_json, canonical_json
from memtrials.llm import read_records
from memtrials.memory.snapshot import digest, restore
from memtrials.seeds import seed_of
from memtrials.studies.antipersist import play
from memtrials.studies.antipersist.design import actor_settings
from memtrials.studies.antipersist.memories import make_memory
from memtrials.studies.antipersist.train import roles, stream_specs, task_pool, train_pool

log = logging.getLogger(__name__)


async def evaluate(config: Mapping[str, Any], *, model: str, env: str, design: str, seed_index: int,
                   cell: Mapping[str, Any], prompts_dir: str, actor_prompts_dir: str, tasks_path: str,
                   memory_path: str, out_episodes: str, out_steps: str, out_calls: str, out_record: str,
                   make_env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Evaluate the trained memory at ``memory_path`` (module docstring)."""
    tasks = task_pool(cell, env, tasks_path, "eval")
    synthesizer, embedder = roles(cell, model)
    plan = stream_specs(cell, model=model, env=env, design=design, seed_index=seed_index,
                        train=train_pool(cell, env, tasks_path))  # the same memory settings as in training
    memory = make_memory(design, cell, prompts_dir, synthesizer=synthesizer, embedder=embedder,
                         seed=seed_of(int(cell["seed"]), "selector", seed_index),
                         rounds=[[s.episode_id for s in r] for r in plan], env=env)
    snap = restore(memory, memory_path)
    base = seed_of(int(cell["seed"]), "seed", seed_index)
    settings = actor_settings(model, cell["actor"])
    cell_id = f"antipersist/{model}/{env}/{design}/seed{seed_index}/eval"
    specs = [EpisodeSpec(env, t, f"{cell_id}/{i:03d}", seed_of(base, "eval", t), settings,
                         columns={"design": design, "seed_index": seed_index, "phase": "eval", "round": 0,
                                  "position": i}) for i, t in enumerate(tasks)]
    view = memory.frozen()
    async with open_job(config, cell_id, out_calls, actor_prompts_dir, env=env, in_flight=int(cell["in_flight"]),
                        env_options=cell["env_options"].get(env) or {}, make_env=make_env) as (runner, client):
        client.expect(len(specs) * int(cell["actor"]["max_actions"]))
        episodes = await runner.concurrent(specs, view)
    after = digest(memory.kind, _plain(memory.state()))
    if after != snap["digest"]:
        raise RuntimeError(f"{cell_id}: the memory changed during a frozen evaluation ({snap['digest'][:12]} -> "
                           f"{after[:12]}); a design's view must not write to its memory")
    play.count_calls(episodes, {})
    frame = play.write(episodes, view, model, env, design, out_episodes, out_steps)
    record = {"design": design, "model": model, "env": env, "seed_index": seed_index, "tasks": tasks,
              "memory_digest": snap["digest"], "memory_unchanged": True, "episodes": int(len(frame)),
              "won": int(frame["won"].sum()), "calls": play.call_counts(read_records(out_calls).to_pandas(), embedder)}
    atomic_write_json(out_record, record)
    log.info("%s: %d of %d won", cell_id, record["won"], record["episodes"])
    return record


def _plain(state: Any) -> Any:
    return json.loads(canonical_json(state, indent=None))
