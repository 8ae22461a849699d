"""Trajectory memory: every training episode kept; the five most similar tasks' runs served.

The anti-persistence paper's first design ("a trajectory record holds the task, the
actions, the observations, and the outcome"), on the memory lifecycle
(:mod:`memtrials.memory.base`):

- :meth:`TrajectoryMemory.update` keeps one record per finished episode, in run order:
  ``{id: T00001.., episode_id, task_id, task, won, final_score, n_steps, termination,
  start, steps: [{step, action, observation}]}``; the start observation and every
  observation are truncated to ``obs_chars`` (300) characters (whitespace collapsed),
  every action is kept (the runner's step cap bounds them).  The task text is embedded
  once, when its first record is kept (``embedder`` endpoint through ``Client.embed``,
  ``purpose="memory_index"``); vectors live in the state (:class:`VectorIndex`), so a
  resumed stream makes exactly the calls an uninterrupted one makes.  No model call
  otherwise.
- :meth:`TrajectoryView.for_episode` embeds the task (``purpose="retrieval"``) and serves
  the ``k`` (5) records whose tasks are most similar (cosine; ties to the earlier record,
  :func:`memtrials.memory.retrieval.top_k`), most similar first, as one block whose lesson
  ids are the record ids.  Episode columns: ``retrieval`` (JSON ``[{id, cosine}]``) and
  ``synthesis_calls`` (0: no call is made to build the block).

The pieces here (records, their rendering, the vector index) are shared by the
abstraction, joint and anti-persistence memories (:mod:`~memtrials.memory.abstraction`,
:mod:`~memtrials.memory.antipersist`).

Construction (the interface every design of the study shares): keyword arguments
``embedder`` (endpoint name), ``k``, ``obs_chars``; ``synthesizer`` and ``prompts_dir`` are
accepted and unused here, so a study can build every design from the same keywords.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import pyarrow as pa

from memtrials.llm.carry import carry, cut_field
from memtrials.memory.base import Lesson, MemoryBlock, StaticEpisode, TaskContext
from memtrials.memory.lessons import trajectory_text
from memtrials.memory.retrieval import top_k

if TYPE_CHECKING:
    from memtrials.llm import Client

TITLE = "Earlier attempts at similar tasks"
OBS_CHARS = 300
RETRIEVAL_COLUMNS: tuple[pa.Field, ...] = (pa.field("retrieval", pa.string()), pa.field("synthesis_calls", pa.int64()))


def prompt_body(text: str) -> str:
    """A prompt file's text without its leading ``<!-- ... -->`` header lines (who wrote it:
    part of the file's digest, never of a message)."""
    lines = text.splitlines()
    while lines and lines[0].lstrip().startswith("<!--"):
        lines = lines[1:]
    return "\n".join(lines).strip("\n")


def _clip(text: Any, limit: int) -> str:
    return " ".join(str(text).split())[:limit]


def trajectory_record(episode: Any, rid: str, obs_chars: int = OBS_CHARS) -> dict[str, Any]:
    """What is kept of one finished episode (module docstring), as plain JSON data."""
    s = episode.summary
    return {"id": rid, "episode_id": str(s["episode_id"]), "task_id": str(s["task_id"]), "task": str(s["task"]),
            "won": bool(s["won"]), "final_score": float(s.get("final_score", 0.0)),
            "n_steps": int(s.get("n_steps", len(episode.steps))), "termination": str(s.get("termination", "")),
            "start": _clip(s.get("initial_observation", ""), obs_chars),
            "steps": [_step_record(st, obs_chars) for st in episode.steps]}


def _step_record(st: Mapping[str, Any], obs_chars: int) -> dict[str, Any]:
    """A step as a trajectory record keeps it: the action cut to ``carry.max_chars`` (``cut``: how
    many characters were left out, only where any were), the observation to ``obs_chars``."""
    kept = carry(str(st["action"]))
    return {"step": int(st["step"]), "action": kept.text, "observation": _clip(st["observation"], obs_chars),
            **cut_field(kept)}


def outcome_text(rec: Mapping[str, Any]) -> str:
    n = rec["n_steps"]
    return f"{'succeeded' if rec['won'] else 'failed'} after {n} action{'s' if n != 1 else ''}"


def render_trajectory(rec: Mapping[str, Any]) -> str:
    """One record as the actor (or a synthesizer) reads it."""
    return (f"[{rec['id']}] Task: {rec['task']}\nOutcome: {outcome_text(rec)}\n"
            + trajectory_text(rec["steps"], max_chars=10 ** 9))


def trajectories_block(records: Sequence[Mapping[str, Any]], title: str = TITLE) -> MemoryBlock:
    """Records as one block: ``title:`` then each rendering, a blank line between them."""
    if not records:
        return MemoryBlock((), title)
    texts = [render_trajectory(r) for r in records]
    return MemoryBlock(tuple(Lesson(r["id"], t) for r, t in zip(records, texts)), title,
                       title + ":\n\n" + "\n\n".join(texts) + "\n")


def text_key(text: str) -> str:
    """The index key of a text: the first 24 hex digits of its SHA-256."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]


class VectorIndex:
    """Embeddings of texts, kept in a memory's state: ``{text_key: base64 of little-endian
    float32}`` (plain JSON, compact); decoded vectors are cached in this process."""

    def __init__(self, embedder: str) -> None:
        self.embedder = embedder
        self.data: dict[str, str] = {}
        self._decoded: dict[str, np.ndarray] = {}

    def copy(self) -> "VectorIndex":
        out = VectorIndex(self.embedder)
        out.data, out._decoded = dict(self.data), self._decoded  # decoded vectors never change
        return out

    def __contains__(self, text: str) -> bool:
        return text_key(text) in self.data

    async def add(self, client: Client, texts: Sequence[str], purpose: str = "memory_index") -> None:
        """Embed the texts not yet indexed (one ``Client.embed`` call for all of them)."""
        new = list(dict.fromkeys(t for t in texts if t not in self))
        if not new:
            return
        res = await client.embed(self.embedder, new, purpose=purpose)
        for t, v in zip(new, np.asarray(res.vectors, dtype="<f4")):
            self.data[text_key(t)] = base64.b64encode(v.tobytes()).decode("ascii")

    def vector(self, text: str) -> np.ndarray:
        key = text_key(text)
        if key not in self._decoded:
            try:
                raw = self.data[key]
            except KeyError:
                raise KeyError(f"vector index: no embedding of {text[:60]!r} (add it first)") from None
            self._decoded[key] = np.frombuffer(base64.b64decode(raw), dtype="<f4").astype(np.float64)
        return self._decoded[key]

    def matrix(self, texts: Sequence[str]) -> np.ndarray:
        return np.array([self.vector(t) for t in texts]) if texts else np.zeros((0, 1))

    async def query(self, client: Client, text: str, purpose: str = "retrieval") -> np.ndarray:
        """The embedding of one query text (a recorded, cached call; not indexed)."""
        res = await client.embed(self.embedder, [text], purpose=purpose)
        return np.asarray(res.vectors[0], dtype=np.float64)

    def state(self) -> dict[str, str]:
        return dict(sorted(self.data.items()))

    def load(self, data: Mapping[str, str]) -> None:
        self.data = {str(k): str(v) for k, v in data.items()}
        self._decoded = {}


def nearest(index: VectorIndex, query: np.ndarray, items: Sequence[Mapping[str, Any]], k: int,
            text: str = "task") -> tuple[list[Mapping[str, Any]], list[dict[str, Any]]]:
    """The ``k`` items whose ``text`` field is most similar to ``query`` (best first), and
    the ``retrieval`` column's entries ``{id, cosine}``."""
    if not items or k <= 0:
        return [], []
    idx, sims = top_k(query, index.matrix([x[text] for x in items]), k)
    return [items[i] for i in idx], [{"id": items[i]["id"], "cosine": round(s, 6)} for i, s in zip(idx, sims)]


class TrajectoryView:
    """A frozen trajectory store: serves the ``k`` most similar tasks' records."""

    step_columns: Sequence[pa.Field] = ()
    episode_columns: Sequence[pa.Field] = RETRIEVAL_COLUMNS

    def __init__(self, records: Sequence[Mapping[str, Any]], index: VectorIndex, k: int, title: str = TITLE) -> None:
        self.records, self.index, self.k, self.title = list(records), index, k, title

    async def retrieve(self, client: Client, task: TaskContext) -> tuple[list[Mapping[str, Any]], list[dict[str, Any]]]:
        if not self.records:
            return [], []
        return nearest(self.index, await self.index.query(client, task.task), self.records, self.k)

    async def for_episode(self, client: Client, task: TaskContext) -> StaticEpisode:
        chosen, info = await self.retrieve(client, task)
        block = trajectories_block(chosen, self.title) if chosen else None
        return StaticEpisode(block, {"retrieval": json.dumps(info), "synthesis_calls": 0})


class TrajectoryMemory:
    """See module docstring."""

    kind = "trajectory_memory"
    episode_columns = RETRIEVAL_COLUMNS

    def __init__(self, *, embedder: str, k: int = 5, obs_chars: int = OBS_CHARS, synthesizer: str | None = None,
                 prompts_dir: str | Path | None = None, title: str = TITLE) -> None:
        if int(k) < 1:
            raise ValueError(f"trajectory memory: k must be >= 1, got {k}")
        if int(obs_chars) < 1:
            raise ValueError(f"trajectory memory: obs_chars must be >= 1, got {obs_chars}")
        self.embedder, self.k, self.obs_chars, self.title = embedder, int(k), int(obs_chars), title
        self.records: list[dict[str, Any]] = []
        self.index = VectorIndex(embedder)

    def frozen(self) -> TrajectoryView:
        return TrajectoryView(self.records, self.index.copy(), self.k, self.title)

    async def keep(self, client: Client, episodes: Sequence[Any]) -> list[dict[str, Any]]:
        """Append one record per episode (run order) and index their tasks; return the new records."""
        new = [trajectory_record(ep, f"T{len(self.records) + i + 1:05d}", self.obs_chars)
               for i, ep in enumerate(episodes)]
        await self.index.add(client, [r["task"] for r in new])
        self.records.extend(new)
        return new

    async def update(self, client: Client, episodes: Sequence[Any]) -> None:
        await self.keep(client, episodes)

    def settings(self) -> dict[str, Any]:
        return {"embedder": self.embedder, "k": self.k, "obs_chars": self.obs_chars}

    def state(self) -> dict[str, Any]:
        return {"settings": self.settings(), "records": json.loads(json.dumps(self.records)),
                "vectors": self.index.state()}

    def load(self, state: Mapping[str, Any]) -> None:
        """Adopt a state's records and vectors (this memory's settings are kept)."""
        self.records = json.loads(json.dumps(list(state["records"])))
        self.index.load(state["vectors"])
