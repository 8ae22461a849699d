"""One held-out evaluation: the trained memory, frozen, on the evaluation pool.

One job per (design, model, benchmark, seed).  The training stream's final snapshot is
restored into a fresh memory of the design, and every evaluation task is played
concurrently (:meth:`memtrials.agent.runner.Runner.concurrent`) against ``memory.frozen()``:
no update is ever called, so the evaluation's episodes never reach the memory, and the
memory's digest after the run must equal the snapshot's (checked; a design that changed
while serving fails the job).  Per-task guidance a design builds at serving (the
anti-persistence modes) is synthesized and dropped as in training; its calls are counted.

Round curves (``every_round``, the config's ``antipersist.eval_every_round``): the snapshot
saved after each training round (``rounds.json``) is evaluated the same way, each in a
fresh memory, on the same held-out tasks with the same episode seeds, so the curves differ
by the memory only.  The episodes' ``round`` column is the snapshot's round (the final
round's rows are the main evaluation, with the episode ids of a final-only evaluation).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
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
                   rounds_path: str | None = None, every_round: bool = False,
                   make_env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Evaluate the trained memory at ``memory_path`` (and, with ``every_round``, each round's
    snapshot in ``rounds_path``) (module docstring)."""
    tasks = task_pool(cell, env, tasks_path, "eval")
    synthesizer, embedder = roles(cell, model)
    plan = stream_specs(cell, model=model, env=env, design=design, seed_index=seed_index,
                        train=train_pool(cell, env, tasks_path))  # the same memory settings as in training

    def fresh() -> Any:
        return make_memory(design, cell, prompts_dir, synthesizer=synthesizer, embedder=embedder,
                           seed=seed_of(int(cell["seed"]), "selector", seed_index),
                           rounds=[[s.episode_id for s in r] for r in plan], env=env)

    final = int(cell["rounds"])
    memory = fresh()
    snap = restore(memory, memory_path)
    snaps = {final: (memory, snap)}
    if every_round:
        if rounds_path is None:
            raise ValueError("evaluate: every_round needs the training stream's rounds.json (rounds_path)")
        for s in json.loads(Path(rounds_path).read_text(encoding="utf-8"))["snapshots"][:-1]:
            m = fresh()
            m.load(s["state"])
            snaps[int(s["round"])] = (m, s)
    base = seed_of(int(cell["seed"]), "seed", seed_index)
    settings = actor_settings(model, cell["actor"])
    cell_id = f"antipersist/{model}/{env}/{design}/seed{seed_index}/eval"

    def specs(r: int) -> list[EpisodeSpec]:
        stem = cell_id if r == final else f"{cell_id}/r{r:02d}"
        return [EpisodeSpec(env, t, f"{stem}/{i:03d}", seed_of(base, "eval", t), settings,
                            columns={"design": design, "seed_index": seed_index, "phase": "eval", "round": r,
                                     "position": i}) for i, t in enumerate(tasks)]

    views = {r: m.frozen() for r, (m, _) in snaps.items()}
    episodes: list[Any] = []
    async with open_job(config, cell_id, out_calls, actor_prompts_dir, env=env, in_flight=int(cell["in_flight"]),
                        env_options=cell["env_options"].get(env) or {}, make_env=make_env) as (runner, client):
        client.expect(len(snaps) * len(tasks) * int(cell["actor"]["max_actions"]))
        for r in sorted(snaps):
            episodes.extend(await runner.concurrent(specs(r), views[r]))
    for r, (m, s) in snaps.items():
        after = digest(m.kind, _plain(m.state()))
        if after != s["digest"]:
            raise RuntimeError(f"{cell_id}: the memory of round {r} changed during a frozen evaluation "
                               f"({s['digest'][:12]} -> {after[:12]}); a design's view must not write to its memory")
    play.count_calls(episodes, {})
    frame = play.write(episodes, views[final], model, env, design, out_episodes, out_steps)
    last = frame[frame["round"] == final]
    record = {"design": design, "model": model, "env": env, "seed_index": seed_index, "tasks": tasks,
              "memory_digest": snap["digest"], "memory_unchanged": True, "episodes": int(len(last)),
              "won": int(last["won"].sum()), "rounds_evaluated": sorted(snaps),
              "won_per_round": {str(r): int(g["won"].sum()) for r, g in frame.groupby("round")},
              "calls": play.call_counts(read_records(out_calls).to_pandas(), embedder)}
    atomic_write_json(out_record, record)
    log.info("%s: %d of %d won (rounds evaluated: %s)", cell_id, record["won"], record["episodes"], sorted(snaps))
    return record


def _plain(state: Any) -> Any:
    return json.loads(canonical_json(state, indent=None))
