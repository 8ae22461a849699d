"""One growth run: passes over the training tasks, the playbook learning after every batch.

Appendix A ("Growth"): ACE in batched mode (:class:`memtrials.memory.ace.ACEPlaybook`) or
Dynamic Cheatsheet, cumulative (:class:`memtrials.memory.cheatsheet.Cheatsheet`), or a
user's memory (``memory-<name>``, any :class:`memtrials.memory.base.PlaybookMemory`), played
through :meth:`memtrials.agent.runner.Runner.stream`: every episode of a batch is served
what the memory's frozen view serves as it stood when the batch started (the whole
playbook, for ACE and DC), then the memory updates on the batch.  A pass plays every
training task once, in the run's seeded order for that pass (:func:`.design.growth_order`).
After each pass the memory's playbook (:meth:`~memtrials.memory.base.PlaybookMemory.playbook`)
is recorded.  Recipe ``std`` stops after a pass that grows the playbook by less than
``min_growth`` (10 %, in lessons: ACE's rule, also a user's memory's; Dynamic Cheatsheet,
which rewrites and can shrink its playbook, by the share of entries a rewrite added or
removed, :func:`rewrite_change`, our declared rule) or after ``max_passes`` (5 in the
paper); ``long`` plays ``long_passes`` (10) with no stop, on three new runs (their own
orders and samples, :func:`.design.growth_parts`).

Resuming.  Inside a pass the stream keeps a checkpoint per batch; after each pass the
pass's episodes, call records and memory snapshot are a checkpoint of their own
(:class:`memtrials.agent.runner.Checkpoints` in ``<record>.work/passes``), so a killed run
rerun resumes from its last complete batch and repeats no completed call (the calls of a
batch cut short replay from the model cache).  The work folder is removed at the end.
"""

from __future__ import annotations

import hashlib
import logging
import math
import shutil
from collections import Counter
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, cast

import pandas as pd

from memtrials.agent.job import open_job
from memtrials.agent.runner import Checkpoints, EpisodeSpec
from memtrials.io import atomic_write_json, canonical_json, write_parquet
from memtrials.llm import read_records
from memtrials.memory.ace import grew_by
from memtrials.memory.base import MemoryContext, PlaybookMemory
from memtrials.memory.registry import build, memory_name
from memtrials.memory.snapshot import snapshot
from memtrials.seeds import seed_of
from memtrials.studies.playbook import play
from memtrials.studies.playbook.design import (
    actor_settings, env_options, growth_order, growth_seed, lesson_tokens, make_memory, role_tasks,
)
from memtrials.studies.playbook.records import PLAYBOOK_SCHEMA, playbook_frame, playbook_rows

log = logging.getLogger(__name__)


def growth_memory(variant: str, cell: Mapping[str, Any], prompts_dir: str, env: str, growth: str,
                  run: int) -> PlaybookMemory:
    """A fresh memory for growth run ``run`` of ``variant``: ACE or Dynamic Cheatsheet
    (:func:`.design.make_memory`), or the user memory ``memory-<name>`` of the cell's ``memory``
    entry, told that the Curator's endpoint synthesizes, ``roles.embedder`` embeds, and the
    run's seed."""
    name = memory_name(variant)
    if name is None:
        return make_memory(variant, cell, prompts_dir)
    context = MemoryContext(name=name, study="playbook", env=env, synthesizer=str(cell["roles"]["curator"]),
                            embedder=str(cell["roles"]["embedder"]),
                            seed=seed_of(int(cell["seed"]), "memory", env, variant, growth, run))
    return cast(PlaybookMemory, build(cell["memory"], context))  # its methods: registry.check_memory


def passes_of(growth: str, g: Mapping[str, Any]) -> tuple[int, bool]:
    """(most passes, whether the 10 % stop applies) of a growth recipe."""
    if growth == "long":
        return int(g["long_passes"]), False
    return int(g["max_passes"]), True


async def growth_run(config: Mapping[str, Any], *, model: str, env: str, variant: str, growth: str, run: int,
                     cell: Mapping[str, Any], prompts_dir: str, actor_prompts_dir: str, tasks_path: str,
                     out_playbooks: str, out_episodes: str, out_steps: str, out_calls: str, out_record: str,
                     make_env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Grow one playbook (module docstring); write every pass's playbook and the run's record."""
    g, seed = cell["growth"], int(cell["seed"])
    train = role_tasks(pd.read_parquet(tasks_path), cell["splits"]["train"], int(g["train_tasks"]), seed,
                       tasks_path, "playbook.growth.train_tasks")
    memory = growth_memory(variant, cell, prompts_dir, env, growth, run)
    max_passes, stop_rule = passes_of(growth, g)
    cell_id = f"playbook/{growth}/{model}/{env}/{variant}/growth/run{run}"
    work = Path(str(out_record) + ".work")
    digest = hashlib.sha256(canonical_json({"cell": cell, "variant": variant, "growth": growth, "run": run,
                                            "tasks": train}, indent=None).encode()).hexdigest()
    passes = Checkpoints(work / "passes", digest)

    def specs(p: int) -> list[EpisodeSpec]:
        out = []
        for i, task in enumerate(growth_order(train, seed, env, run, p, growth)):
            s = growth_seed(seed, env, run, p, task, growth)
            out.append(EpisodeSpec(env, task, f"{cell_id}/p{p}/{i:03d}", s, actor_settings(model, cell["actor"], s),
                                   columns=play.columns(round="growth", split="train", growth_pass=p)))
        return out

    rows: list[dict[str, Any]] = []
    stats: list[dict[str, Any]] = []
    counted_by = cell["tokenizer"]
    async with open_job(config, cell_id, out_calls, actor_prompts_dir, env=env, in_flight=int(cell["in_flight"]),
                        episodes=int(g["batch_size"]), env_options=env_options(cell, env), make_env=make_env) as (runner, client):
        client.expect(max_passes * len(train) * int(cell["actor"]["max_actions"]))
        done, episodes = passes.resume(memory, client.recorder)
        prev_texts: list[str] = []
        if done:
            log.info("%s: resumed after pass %d", cell_id, done)
            prev_texts = _load_passes(work, done, rows, stats)
        stopped = bool(stats and stats[-1]["stop"])
        p = done
        while not stopped and p < max_passes:
            p += 1
            before = client.recorder.call_ids()
            eps = await runner.stream(specs(p), memory, batch_size=int(g["batch_size"]),
                                      checkpoints=work / f"pass-{p}")
            episodes.extend(eps)
            counts, counted_by = await lesson_tokens(client, cell["tokenizer"], model, _texts(memory))
            now = playbook_rows(memory, p, counts.__getitem__)
            growth_rate = pass_change(variant, prev_texts, [r["text"] for r in now])
            stopped = stop_rule and growth_rate < float(g["min_growth"])
            stat = {"pass": p, "n_lessons": len(now), "tokens": sum(r["tokens"] for r in now), "counted_by": counted_by,
                    "grew_by": None if math.isinf(growth_rate) else round(growth_rate, 9), "stop": bool(stopped),
                    "measured": "rewrite" if variant == "dc" else "lessons",
                    "won": sum(bool(e.summary["won"]) for e in eps), "episodes": len(eps)}
            atomic_write_json(work / f"pass-{p}.json", {"rows": now, "stat": stat})
            made = client.recorder.records_except(before)
            passes.write(p - 1, eps, made, memory)
            rows.extend(now)
            stats.append(stat)
            prev_texts = [r["text"] for r in now]
    play.write(episodes, model, env, f"{variant}/{growth}/run{run}", out_episodes, out_steps)
    write_parquet(playbook_frame(rows), out_playbooks, schema=PLAYBOOK_SCHEMA)
    calls = read_records(out_calls).to_pandas()
    record = {"model": model, "env": env, "variant": variant, "growth": growth, "run": run, "train_tasks": train,
              "max_passes": max_passes, "stop_rule": stop_rule, "min_growth": float(g["min_growth"]),
              "passes": stats, "n_passes": len(stats), "tokenizer": cell["tokenizer"],
              "counted_by": stats[-1]["counted_by"] if stats else counted_by,
              "calls": _call_counts(calls), "memory": snapshot(memory)}
    atomic_write_json(out_record, record)
    shutil.rmtree(work, ignore_errors=True)
    log.info("%s: %d passes, %d lessons", cell_id, len(stats), stats[-1]["n_lessons"] if stats else 0)
    return record


def _texts(memory: PlaybookMemory) -> list[str]:
    """The texts of the memory's playbook (ACE's lessons, a cheatsheet's entries, ...)."""
    return [x.text for x in memory.playbook()]


def _load_passes(work: Path, done: int, rows: list[dict[str, Any]], stats: list[dict[str, Any]]) -> list[str]:
    """Reload the completed passes; the last one's lesson texts."""
    import json

    prev: list[str] = []
    for p in range(1, done + 1):
        data = json.loads((work / f"pass-{p}.json").read_text(encoding="utf-8"))
        rows.extend(data["rows"])
        stats.append(data["stat"])
        prev = [r["text"] for r in data["rows"]]
    return prev


def rewrite_change(before: Sequence[str], after: Sequence[str]) -> float:
    """Dynamic Cheatsheet's pass change (our declared rule): the entries a rewrite added or
    removed (texts, counted with multiplicity) over the entries before it; from an empty
    cheatsheet, infinite if it wrote any entry, else 0.  A rewrite that shrinks the cheatsheet
    changes it (dropping 5 of 10 entries is a change of 0.5), where ACE's lesson-count rule
    would read a negative growth and stop."""
    if not before:
        return math.inf if after else 0.0
    b, a = Counter(before), Counter(after)
    return (sum((a - b).values()) + sum((b - a).values())) / len(before)


def pass_change(variant: str, before: Sequence[str], after: Sequence[str]) -> float:
    """What the 10 % stop compares with ``min_growth`` after a pass: for Dynamic Cheatsheet,
    which rewrites its whole playbook, :func:`rewrite_change`; for ACE (which never removes a
    lesson: the paper's rule) and a user's memory, the growth in lessons (:func:`memtrials.memory.ace.grew_by`)."""
    if variant == "dc":
        return rewrite_change(before, after)
    return grew_by(len(before), len(after))


def _call_counts(calls: pd.DataFrame) -> dict[str, dict[str, int]]:
    """Calls and tokens per purpose (actor, ace_reflector, ace_curator, dc_curator, ace_dedup)."""
    out: dict[str, dict[str, int]] = {}
    for purpose, grp in calls.groupby("purpose"):
        out[str(purpose)] = {"calls": int(len(grp)), "prompt_tokens": int(grp["prompt_tokens"].fillna(0).sum()),
                             "completion_tokens": int(grp["completion_tokens"].fillna(0).sum())}
    return out
