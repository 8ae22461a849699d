"""One training stream: ``rounds`` rounds of ``round_size`` tasks, the memory learning as it goes.

One job per (design, model, benchmark, seed).  Each round is played through
:meth:`memtrials.agent.runner.Runner.stream` in batches of ``batch_size`` (B): every
episode of a batch is served the memory as it stood when the batch started, then the
memory updates on the batch in spec order (B = 1: fully sequential).  An episode that
reaches ``actor.max_actions`` environment steps (50 in the paper) without winning fails.

Resuming.  Inside a round the stream keeps a checkpoint per batch; after each round the
round's episodes, call records and memory snapshot are a checkpoint of their own
(:class:`memtrials.agent.runner.Checkpoints` under ``<memory>.work/rounds``), so a killed
job rerun resumes from its last complete batch and repeats no completed call (the calls of
a batch cut short replay from the model cache).  The work folder is removed at the end.

Outputs: the episode and step tables, the call records, the final memory snapshot
(:mod:`memtrials.memory.snapshot`, what the evaluation job restores) and ``rounds.json``
(the snapshot after every round and the round's success and calls).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any, Callable, Mapping

import pandas as pd

from memtrials.agent.job import open_job
from memtrials.agent.runner import Checkpoints, EpisodeSpec
from memtrials.io import atomic_write_json, canonical_json
from memtrials.llm import read_records
from memtrials.memory.snapshot import snapshot, write_snapshot
from memtrials.seeds import seed_of
from memtrials.studies.antipersist import play
from memtrials.studies.antipersist.design import actor_settings, pool, training_order
from memtrials.studies.antipersist.memories import make_memory

log = logging.getLogger(__name__)


def stream_specs(cell: Mapping[str, Any], *, model: str, env: str, design: str, seed_index: int,
                 train: list[str]) -> list[list[EpisodeSpec]]:
    """The episodes of each round, in play order."""
    base = seed_of(int(cell["seed"]), "seed", seed_index)
    rounds = training_order(train, int(cell["rounds"]), int(cell["round_size"]), base)
    settings = actor_settings(model, cell["actor"])
    cell_id = cell_name(model, env, design, seed_index)
    out = []
    for r, tasks in enumerate(rounds, 1):
        out.append([EpisodeSpec(env, t, f"{cell_id}/r{r:02d}/{i:03d}", seed_of(base, "train", r, i, t), settings,
                                columns={"design": design, "seed_index": seed_index, "phase": "train", "round": r,
                                         "position": i}) for i, t in enumerate(tasks)])
    return out


def cell_name(model: str, env: str, design: str, seed_index: int) -> str:
    return f"antipersist/{model}/{env}/{design}/seed{seed_index}/train"


def roles(cell: Mapping[str, Any], model: str) -> tuple[str, str]:
    """(synthesizer, embedder) endpoint names: the backbone synthesizes unless one is named."""
    return str(cell["synthesizer"] or model), str(cell["embedder"])


def task_pool(cell: Mapping[str, Any], env: str, tasks_path: str, part: str) -> list[str]:
    """The ``part`` (``train`` or ``eval``) task pool of ``env``: ``pools.<env>.<part>_split`` and
    ``<part>_tasks`` of the cell, drawn with the cell's seed."""
    p = cell["pools"][env]
    return pool(pd.read_parquet(tasks_path), p[f"{part}_split"], p[f"{part}_tasks"], int(cell["seed"]), tasks_path,
                f"antipersist.pools.{env}.{part}_tasks")


def train_pool(cell: Mapping[str, Any], env: str, tasks_path: str) -> list[str]:
    return task_pool(cell, env, tasks_path, "train")


async def train_stream(config: Mapping[str, Any], *, model: str, env: str, design: str, seed_index: int,
                       cell: Mapping[str, Any], prompts_dir: str, actor_prompts_dir: str, tasks_path: str,
                       out_episodes: str, out_steps: str, out_calls: str, out_memory: str, out_rounds: str,
                       make_env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Run one training stream (module docstring) and write its outputs."""
    train = train_pool(cell, env, tasks_path)
    rounds = stream_specs(cell, model=model, env=env, design=design, seed_index=seed_index, train=train)
    synthesizer, embedder = roles(cell, model)
    memory = make_memory(design, cell, prompts_dir, synthesizer=synthesizer, embedder=embedder,
                         seed=seed_of(int(cell["seed"]), "selector", seed_index),
                         rounds=[[s.episode_id for s in r] for r in rounds], env=env)
    cell_id = cell_name(model, env, design, seed_index)
    work = Path(str(out_memory) + ".work")
    digest = hashlib.sha256(canonical_json({"cell": cell, "design": design, "seed": seed_index,
                                            "specs": [[s.identity() for s in r] for r in rounds]},
                                           indent=None).encode()).hexdigest()
    done_rounds = Checkpoints(work / "rounds", digest)
    async with open_job(config, cell_id, out_calls, actor_prompts_dir, env=env, in_flight=int(cell["in_flight"]),
                        env_options=cell["env_options"].get(env) or {}, make_env=make_env) as (runner, client):
        client.expect(sum(len(r) for r in rounds) * int(cell["actor"]["max_actions"]))
        done, episodes = done_rounds.resume(memory, client.recorder)
        snaps = [json.loads(done_rounds.path(r).read_text(encoding="utf-8"))["memory"] for r in range(done)]
        if done:
            log.info("%s: resumed after round %d of %d", cell_id, done, len(rounds))
        for r in range(done, len(rounds)):
            before = client.recorder.call_ids()
            eps = await runner.stream(rounds[r], memory, batch_size=int(cell["batch_size"]),
                                      checkpoints=work / f"round-{r + 1:02d}")
            made = client.recorder.records_except(before)
            done_rounds.write(r, eps, made, memory)
            snaps.append(snapshot(memory))
            episodes.extend(eps)
    view = memory.frozen()
    play.count_calls(episodes, getattr(memory, "update_calls", {}))
    frame = play.write(episodes, view, model, env, design, out_episodes, out_steps)
    write_snapshot(out_memory, memory, design=design, model=model, env=env, seed_index=seed_index)
    per_round = [{"round": int(r), "episodes": int(len(g)), "won": int(g["won"].sum()),
                  "llm_calls": int(g["llm_calls"].sum())} for r, g in frame.groupby("round")]
    record = {"design": design, "model": model, "env": env, "seed_index": seed_index, "train_tasks": train,
              "rounds": per_round, "snapshots": [{"round": r + 1, **s} for r, s in enumerate(snaps)],
              "calls": play.call_counts(read_records(out_calls).to_pandas(), embedder),
              "parse_failures": play.parse_failures(memory.state())}
    atomic_write_json(out_rounds, record)
    shutil.rmtree(work, ignore_errors=True)
    log.info("%s: %d episodes, %d won", cell_id, len(frame), int(frame["won"].sum()))
    return record
