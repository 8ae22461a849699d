"""The one episode runner: a list of episodes over an environment pool, in two orders.

- :meth:`Runner.concurrent` -- every episode sees the same frozen memory (or the view its
  spec names: practice rounds serve each episode its own subset), up to ``in_flight`` at
  once; practice rounds, evaluation and the history study's cells;
- :meth:`Runner.stream` -- batches of ``B``: every episode of a batch sees the memory as it
  stood at the batch's start, the batch runs concurrently, then the memory learns from
  the batch (``Memory.update``, in spec order) before the next batch starts (ACE's batched
  mode; ``B = 1`` is fully sequential).  After each batch a checkpoint (the batch's
  episodes, the call records it made, the memory's snapshot) is written atomically, so a
  killed stream rerun resumes after its last complete batch; the calls of the batch that
  was cut short replay from the model cache.

:func:`write_episodes` writes the episode and step tables with declared schemas
(:mod:`memtrials.agent.records`, plus the columns a memory declares); the call records
are written by the client (:func:`memtrials.llm.open_client`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import pandas as pd
import pyarrow as pa

from memtrials.agent.actor import ActorSettings, Composer, Episode, run_episode
from memtrials.agent.order import REQUEST_ORDERS, Admission
from memtrials.agent.records import EPISODE_SCHEMA, STEP_SCHEMA, table, write_rows
from memtrials.agent.review import StepHook
from memtrials.agent.views import Entry
from memtrials.envs.pool import EnvPool
from memtrials.io import atomic_write_json, canonical_json, write_parquet
from memtrials.memory.base import Memory, MemoryView, TaskContext
from memtrials.memory.snapshot import digest as state_digest
from memtrials.memory.snapshot import snapshot

if TYPE_CHECKING:
    from memtrials.agent.prompts import ActorPrompts
    from memtrials.agent.spill import StepSpill
    from memtrials.envs.base import Env
    from memtrials.llm import Client

log = logging.getLogger(__name__)

ORDERS = ("concurrent", "stream")


@dataclass(frozen=True)
class EpisodeSpec:
    """One episode to play: its task, seed, actor and what memory it is served.

    ``memory`` overrides the run's view for this episode (e.g. a practice round's random
    subset); ``prepare(env) -> start observation`` restores a state instead of ``reset``;
    ``hooks`` default to the actor settings' (a review when ``settings.review``);
    ``columns`` are extra episode columns the cell declares (an arm label, a block mask).
    """

    env: str
    task_id: str
    episode_id: str
    seed: int | str
    settings: ActorSettings
    composer: Composer | None = None
    prepare: Callable[[Env], Any] | None = None
    hooks: Sequence[StepHook] | None = None
    memory: MemoryView | None = None
    columns: Mapping[str, Any] = field(default_factory=dict)

    def identity(self) -> dict[str, Any]:
        """What of the spec is plain data (part of a stream's run digest)."""
        return {"env": self.env, "task_id": self.task_id, "episode_id": self.episode_id, "seed": self.seed,
                "settings": asdict(self.settings), "columns": dict(self.columns)}


class Runner:
    """Plays :class:`EpisodeSpec` s with one client, one pool and one prompt set."""

    def __init__(self, client: Client, pool: EnvPool, prompts: ActorPrompts, *, in_flight: int,
                 request_order: str = REQUEST_ORDERS[0]) -> None:
        if in_flight < 1:
            raise ValueError(f"in_flight must be >= 1, got {in_flight}")
        if request_order not in REQUEST_ORDERS:
            raise ValueError(f"request.order must be one of {', '.join(REQUEST_ORDERS)}, got {request_order!r}")
        self.client, self.pool, self.prompts, self.in_flight = client, pool, prompts, in_flight
        self.request_order = request_order
        self._admission: Admission | None = None

    async def play(self, spec: EpisodeSpec, view: MemoryView | None = None, spill: StepSpill | None = None) -> Episode:
        """One episode on an environment from the pool (its steps moved to ``spill`` when it ends,
        its history entries dropped: :meth:`concurrent`)."""
        if self._admission is None:
            self._admission = Admission(self.in_flight)
        # the episode's requests take the endpoint's free slots in its rank (memtrials.agent.order)
        async with self._admission.turn(self.request_order):
            env = await self.pool.acquire()
            try:
                call = self.pool.caller(env)
                start = await call(spec.prepare, env) if spec.prepare is not None else await call(env.reset, spec.task_id)
                task = await call(env.task_description)
                view = spec.memory if spec.memory is not None else view
                served = None
                if view is not None:
                    served = await view.for_episode(self.client, TaskContext(
                        spec.env, spec.task_id, task, spec.episode_id, spec.seed, getattr(start, "text", "")))
                ep = await run_episode(
                    self.client, env, self.prompts, spec.settings, env_name=spec.env, task_id=spec.task_id,
                    episode_id=spec.episode_id, seed=spec.seed, composer=spec.composer, memory=served,
                    hooks=spec.hooks, start_obs=start, env_call=call, task=task)
                if served is not None:
                    ep.summary.update(served.columns)
                ep.summary.update(spec.columns)
                if spill is not None:
                    ep.steps, ep.entries = spill.put(ep.steps), []  # type: ignore[assignment]
                return ep
            finally:
                self.pool.release(env)

    async def concurrent(self, specs: Sequence[EpisodeSpec], view: MemoryView | None = None,
                         spill: StepSpill | None = None) -> list[Episode]:
        """Every spec against ``view`` (frozen), up to ``in_flight`` at once; results in spec order.

        ``spill`` (:class:`memtrials.agent.spill.StepSpill`): each finished episode's step rows go
        to disk and its history entries are dropped, so a cell that only writes its tables
        (:func:`write_episodes`) holds no episode's steps in memory; not for a memory that learns
        from the episodes."""
        await self.pool.fill()  # builds only what is missing: a no-op after the first batch
        tasks = [asyncio.ensure_future(self.play(s, view, spill)) for s in specs]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise

    async def stream(self, specs: Sequence[EpisodeSpec], memory: Memory, *, batch_size: int,
                     checkpoints: str | Path | None = None,
                     on_batch: Callable[[int, Memory], None] | None = None) -> list[Episode]:
        """Batches of ``batch_size`` in spec order, the memory updated after each (module docstring).

        ``checkpoints``: a folder for the per-batch checkpoints (resume after a kill); it is
        removed when the stream completes.  ``on_batch(k, memory)`` runs after batch ``k``'s
        update (e.g. to write a per-round snapshot artifact).
        """
        if batch_size < 1:
            raise ValueError(f"stream batch size must be >= 1, got {batch_size}")
        batches = [list(specs[i:i + batch_size]) for i in range(0, len(specs), batch_size)]
        ckpt = Checkpoints(checkpoints, run_digest(specs, batch_size, memory)) if checkpoints else None
        episodes: list[Episode] = []
        start = 0
        if ckpt is not None:
            start, episodes = ckpt.resume(memory, self.client.recorder)
            if start:
                log.info("stream: resumed after batch %d of %d (%s)", start, len(batches), ckpt.folder)
        for k in range(start, len(batches)):
            before = self.client.recorder.call_ids()
            eps = await self.concurrent(batches[k], memory.frozen())
            await memory.update(self.client, eps)
            episodes.extend(eps)
            if ckpt is not None:
                made = self.client.recorder.records_except(before)
                ckpt.write(k, eps, made, memory)
            if on_batch is not None:
                on_batch(k, memory)
        if ckpt is not None:
            ckpt.remove()
        return episodes


def run_digest(specs: Sequence[EpisodeSpec], batch_size: int, memory: Memory) -> str:
    """What a stream's checkpoints must match to be resumed: specs, batch size, the memory's
    kind and its state before the first batch."""
    payload = {"specs": [s.identity() for s in specs], "batch_size": batch_size, "kind": memory.kind,
               "initial": state_digest(memory.kind, json.loads(canonical_json(memory.state(), indent=None)))}
    return hashlib.sha256(canonical_json(payload, indent=None).encode()).hexdigest()


def _episode_data(ep: Episode) -> dict[str, Any]:
    return {"steps": ep.steps, "summary": ep.summary, "final_info": ep.final_info,
            "entries": [[e.observation, e.action, e.experience] for e in ep.entries]}


def _episode_from(data: Mapping[str, Any]) -> Episode:
    return Episode(steps=list(data["steps"]), summary=dict(data["summary"]),
                   entries=[Entry(o, a, x) for o, a, x in data["entries"]], final_info=dict(data["final_info"]))


class Checkpoints:
    """The per-batch checkpoints of one stream: ``batch-NNNNN.json`` in ``folder``."""

    def __init__(self, folder: str | Path, digest: str) -> None:
        self.folder, self.digest = Path(folder), digest

    def path(self, k: int) -> Path:
        return self.folder / f"batch-{k:05d}.json"

    def write(self, k: int, episodes: Sequence[Episode], records: Sequence[Mapping[str, Any]], memory: Memory) -> None:
        atomic_write_json(self.path(k), {
            "run_digest": self.digest, "batch": k, "episodes": [_episode_data(e) for e in episodes],
            "records": sorted(records, key=lambda r: r["call_id"]), "memory": snapshot(memory)}, indent=None)

    def resume(self, memory: Memory, recorder: Any) -> tuple[int, list[Episode]]:
        """Load the complete batches 0..k-1 of this run; return ``k`` and their episodes."""
        if not self.folder.is_dir():
            return 0, []
        episodes: list[Episode] = []
        k = 0
        last = None
        while self.path(k).is_file():
            data = json.loads(self.path(k).read_text(encoding="utf-8"))
            if data.get("run_digest") != self.digest:
                log.warning("stream: %s belongs to another run (specs, batch size or memory changed); "
                            "starting over (cached calls replay)", self.folder)
                self.remove()
                return 0, []
            episodes.extend(_episode_from(e) for e in data["episodes"])
            recorder.restore(data["records"])
            last = data["memory"]
            k += 1
        if last is not None:
            if state_digest(last["kind"], last["state"]) != last["digest"]:
                raise ValueError(f"{self.folder}: checkpoint memory does not match its digest; delete the folder")
            memory.load(last["state"])
        return k, episodes

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def episode_schema(extra: Sequence[pa.Field] = (), base: pa.Schema = EPISODE_SCHEMA) -> pa.Schema:
    schema = base
    for f in extra:
        if f.name not in schema.names:
            schema = schema.append(f)
    return schema


def write_episodes(episodes: Sequence[Episode], cell_cols: Mapping[str, Any], task_index: Mapping[str, int],
                   out_episodes: str, out_steps: str, extra: Sequence[Mapping[str, Any]] | None = None,
                   schema: pa.Schema = EPISODE_SCHEMA, step_schema: pa.Schema = STEP_SCHEMA) -> pd.DataFrame:
    """Write the episode table (one row per episode, in task order) and the step table.

    ``extra`` adds per-episode columns (declared in ``schema``, e.g. the continuation's);
    a memory's declared columns extend ``schema`` / ``step_schema`` (:func:`episode_schema`).
    """
    rows = []
    for k, ep in enumerate(episodes):
        row = {**ep.summary, **cell_cols, "task_index": task_index[ep.summary["task_id"]]}
        if extra is not None:
            row.update(extra[k])
        rows.append(row)
    order = sorted(range(len(rows)), key=lambda k: (rows[k]["task_index"], rows[k]["episode_id"]))
    ep_table = table([rows[k] for k in order], schema)
    # built a chunk of rows at a time (episodes' spilled steps are read back one episode at a time),
    # written a row group at a time when the cell is long (records.write_rows)
    write_rows((st for k in order for st in episodes[k].steps), sum(len(ep.steps) for ep in episodes),
               step_schema, out_steps)
    write_parquet(ep_table, out_episodes)
    return ep_table.to_pandas()
