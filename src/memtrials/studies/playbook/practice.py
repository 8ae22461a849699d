"""One practice round for one growth run: blocks, randomized inclusion, estimates, curated set.

Section 3.2.  The run's final playbook is embedded (``roles.embedder``, one
``Client.embed`` call per lesson text, cached) and clustered by Ward's method into ``m``
blocks (:func:`memtrials.curation.cluster_blocks`; fewer lessons than ``m``: one block a
lesson, recorded).  Each practice episode ``i`` draws its task, its actor seed and an
inclusion ``z_ij ~ Bernoulli(p)`` per block from its own seeded generator
(:func:`memtrials.curation.practice_round`, recorded per episode in the design table and
on the episode row); the actor is served the included blocks' lessons in playbook order.
All episodes of the round run concurrently, each against its own subset.  The block
estimates (ridge with task intercepts, lambda by leaving one task out; with/without and
its interval) and the curated set (positive blocks, largest first, within ``B`` of the
whole playbook's tokens) follow.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable, Mapping

import numpy as np
import pandas as pd

from memtrials.agent.job import open_job
from memtrials.agent.runner import EpisodeSpec
from memtrials.curation import (
    BLOCKS_SCHEMA, ESTIMATES_SCHEMA, block_estimates, cluster_blocks, curate, practice_round, served_lessons,
    write_design,
)
from memtrials.curation.blocks import Blocks
from memtrials.io import atomic_write_json, write_parquet
from memtrials.seeds import seed_of
from memtrials.studies.playbook import play
from memtrials.studies.playbook.design import actor_settings, env_options, role_tasks
from memtrials.studies.playbook.records import final_playbook

if TYPE_CHECKING:
    from memtrials.llm import Client

log = logging.getLogger(__name__)


async def embed_blocks(client: Client, embedder: str, lessons: pd.DataFrame, m: int) -> Blocks:
    """The playbook's lessons clustered into ``m`` blocks on their embeddings."""
    ids = [str(x) for x in lessons["lesson_id"]]
    if not ids:
        return cluster_blocks([], np.zeros((0, 1)), m)
    result = await client.embed(embedder, [str(t) for t in lessons["text"]], purpose="playbook_blocks")
    return cluster_blocks(ids, np.asarray(result.vectors, dtype=float), m)


def block_examples(blocks: Blocks, lessons: pd.DataFrame) -> list[dict[str, Any]]:
    """Each block's lesson ids, tokens and one example lesson (its first)."""
    text = dict(zip(lessons["lesson_id"], lessons["text"]))
    tokens = dict(zip(lessons["lesson_id"], lessons["tokens"].astype(int)))
    out = []
    for b in range(blocks.m):
        ids = list(blocks.members(b))
        out.append({"block": b, "lesson_ids": ids, "tokens": int(sum(tokens[i] for i in ids)),
                    "example": text[ids[0]]})
    return out


async def practice_run(config: Mapping[str, Any], *, model: str, env: str, variant: str, growth: str, run: int,
                       cell: Mapping[str, Any], actor_prompts_dir: str, tasks_path: str, playbooks_path: str,
                       out_blocks: str, out_design: str, out_estimates: str, out_episodes: str, out_steps: str,
                       out_calls: str, out_record: str, make_env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """The practice round of growth run ``run`` (module docstring)."""
    meas, seed = cell["measurement"], int(cell["seed"])
    practice = role_tasks(pd.read_parquet(tasks_path), cell["splits"]["practice"], int(meas["practice_tasks"]),
                          seed, tasks_path, "playbook.measurement.practice_tasks")
    lessons = final_playbook(playbooks_path)
    cell_id = f"playbook/{growth}/{model}/{env}/{variant}/practice/run{run}"
    n = int(meas["episodes"])
    async with open_job(config, cell_id, out_calls, actor_prompts_dir, env=env, in_flight=int(cell["in_flight"]),
                        episodes=n, env_options=env_options(cell, env), make_env=make_env) as (runner, client):
        blocks = await embed_blocks(client, cell["roles"]["embedder"], lessons, int(meas["blocks"]))
        design = practice_round(practice, n, blocks.m, seed=seed_of(seed, "practice", env, variant, growth, run),
                                p=float(meas["p"]), task_order=meas["task_order"])
        zcols = [f"z{j}" for j in range(blocks.m)]
        tokens = dict(zip(lessons["lesson_id"], lessons["tokens"].astype(int)))
        specs = []
        for row in design.itertuples(index=False):
            z = [int(getattr(row, c)) for c in zcols]
            ids = set(served_lessons(blocks, z)) if blocks.m else set()
            served = lessons[lessons["lesson_id"].isin(ids)]
            s = int(row.actor_seed)
            specs.append(EpisodeSpec(
                env, str(row.task_id), f"{cell_id}/{int(row.episode):04d}", s, actor_settings(model, cell["actor"], s),
                memory=play.view_of(served, cell["grouped"]),
                columns=play.columns(round="practice", split="practice", design_episode=int(row.episode),
                                     inclusion="".join(map(str, z)), served_tokens=int(sum(tokens[i] for i in ids)))))
        client.expect(n * int(cell["actor"]["max_actions"]))
        episodes = await runner.concurrent(specs)
    play.write(episodes, model, env, f"{variant}/{growth}/practice/run{run}", out_episodes, out_steps)
    write_parquet(blocks.table(), out_blocks, schema=BLOCKS_SCHEMA)
    write_design(design, blocks.m, out_design)
    scores = pd.DataFrame({"episode": [int(e.summary["design_episode"]) for e in episodes],
                           "score": [play.score(e.summary, env) for e in episodes]})
    record: dict[str, Any] = {"model": model, "env": env, "variant": variant, "growth": growth, "run": run,
                              "practice_tasks": practice, "episodes": n, "p": float(meas["p"]),
                              "blocks": blocks.record(), "block_lessons": block_examples(blocks, lessons),
                              "whole_tokens": int(lessons["tokens"].sum()) if len(lessons) else 0,
                              "whole_ids": [str(x) for x in lessons["lesson_id"]],
                              "practice_score": float(scores["score"].mean()) if n else float("nan")}
    if blocks.m >= 1:
        est = block_estimates(design, scores, blocks.m, level=float(meas["level"]))
        table = est.table
        record["ridge"] = {"lambda": float(est.fit.lam), "shrink": float(est.fit.shrink), "n": est.fit.n,
                           "n_tasks": est.fit.n_tasks}
        cur = curate(table["estimate"].to_numpy(), blocks.block_tokens(tokens), budget=float(meas["budget"]),
                     rule=meas["curate_rule"])
    else:  # an empty playbook: no block to measure, the curated set is empty
        table = pd.DataFrame({f.name: pd.Series(dtype=f.type.to_pandas_dtype()) for f in ESTIMATES_SCHEMA})
        record["ridge"] = None
        cur = curate(np.zeros(0), np.zeros(0, dtype=np.int64), budget=float(meas["budget"]), rule=meas["curate_rule"])
    write_parquet(table, out_estimates, schema=ESTIMATES_SCHEMA)
    chosen = set(cur.blocks)
    curated_ids = [lid for lid, b in zip(blocks.lesson_ids, blocks.labels) if b in chosen]
    record["estimates"] = table.to_dict("records")
    record["curated"] = {"blocks": list(cur.blocks), "lesson_ids": curated_ids, "served_tokens": cur.served_tokens,
                         "whole_tokens": cur.whole_tokens, "cap_tokens": cur.cap_tokens,
                         "skipped": list(cur.skipped), "rule": cur.rule, "budget": float(meas["budget"])}
    atomic_write_json(out_record, json_ready(record))
    log.info("%s: %d blocks, curated %s (%d of %d tokens)", cell_id, blocks.m, list(cur.blocks),
             cur.served_tokens, cur.whole_tokens)
    return record


def json_ready(obj: Any) -> Any:
    """JSON-ready data: numpy scalars as Python numbers, NaN as null."""
    if isinstance(obj, dict):
        return {str(k): json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [json_ready(v) for v in obj]
    if isinstance(obj, (np.integer,)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return None if not np.isfinite(obj) else float(obj)
    return obj
