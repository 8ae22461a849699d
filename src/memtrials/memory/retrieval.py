"""Retrieval by embedding: the ``k`` items most similar to the task, chosen per episode.

The texts are embedded through the model layer (``Client.embed`` on the ``embedder``
role's endpoint: cached per text, recorded), so retrieval replays like every other call.
Similarity is the cosine of L2-normalised vectors; ties go to the earlier item, so the
choice is a pure function of the vectors.  Used by ReasoningBank-style top-k lessons
(:class:`TopKView`) and by trajectory stores that retrieve past episodes by task.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np
import pyarrow as pa

from memtrials.memory.base import Lesson, MemoryBlock, StaticEpisode, TaskContext

if TYPE_CHECKING:
    from memtrials.llm import Client


def normalise(vectors: Any) -> np.ndarray:
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(norms == 0, 1.0, norms)


def top_k(query: Any, keys: Any, k: int) -> tuple[list[int], list[float]]:
    """Indices of the ``k`` keys most similar to ``query`` (cosine), best first, and their scores."""
    keys = normalise(keys)
    if len(keys) == 0 or k <= 0:
        return [], []
    sims = keys @ normalise(query)
    order = sorted(range(len(sims)), key=lambda i: (-round(float(sims[i]), 12), i))[:k]
    return order, [float(sims[i]) for i in order]


@dataclass
class TopKView:
    """Serves the ``k`` lessons most similar to the task text (``embedder``: an endpoint name).

    Records per episode the retrieved ids with their similarities (``retrieval``, JSON).
    """

    lessons: Sequence[Lesson]
    k: int
    embedder: str
    title: str = "Lessons from earlier tasks"
    step_columns: Sequence[pa.Field] = ()
    episode_columns: Sequence[pa.Field] = (pa.field("retrieval", pa.string()),)

    async def for_episode(self, client: Client, task: TaskContext) -> StaticEpisode:
        if not self.lessons:
            return StaticEpisode(MemoryBlock((), self.title), {"retrieval": json.dumps([])})
        keys = await client.embed(self.embedder, [x.text for x in self.lessons], purpose="retrieval")
        query = await client.embed(self.embedder, [task.task], purpose="retrieval")
        idx, sims = top_k(query.vectors[0], keys.vectors, self.k)
        chosen = tuple(self.lessons[i] for i in idx)
        info = [{"id": self.lessons[i].id, "cosine": round(s, 6)} for i, s in zip(idx, sims)]
        return StaticEpisode(MemoryBlock(chosen, self.title), {"retrieval": json.dumps(info)})
