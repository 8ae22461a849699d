"""Reflexion as a memory: a reflection after each failure, served on a retry of the same task.

Reflexion (Shinn et al., 2023), as the anti-persistence paper uses it as a baseline and as
its public ALFWorld runs do it: after an attempt **fails**, one ``synthesizer`` call reads
the task, the attempt (actions and what they returned) and the earlier reflections on the
same task, and writes a short reflection in plain text.  Reflections are kept per task id,
the **last three** (``max_reflections``) only.  Successes write nothing.

Serving.  Without an ``embedder`` (Reflexion's own episodic memory) an attempt at a task is
served that task's reflections (oldest first) and nothing else, so a task never attempted
before is served nothing.  With an ``embedder`` and a budget ``k`` (**cross-task**
Reflexion, what the anti-persistence study runs, since its held-out tasks never occur in
training): the task's own reflections come first (the newest ``k`` of them, oldest
first), then the budget is filled with other tasks' reflections, ranked by the cosine
between the task texts (each stored task text embedded once, ``purpose="memory_index"``;
ties to the earlier reflection), each shown with the task it was written on.  At most
``k`` reflections in all: the retrieval budget of the study's other designs.

Where the project departs: Reflexion retries one task up to a trial cap before moving on;
here retries happen when the training stream meets the task again (rounds revisit
tasks); the cross-task serving is the project's (docs/antipersist.md).  An empty reply
is recorded in ``rejected`` (its call id and the reason), never stored as an empty
reflection.  The prompts are the project's own (``config/prompts/memory/reflexion_*.md``).

Every synthesis call is attributed to the episode it reflects on (``update_calls``), so a
study can count LLM calls per episode (synthesis plus execution).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa

from memtrials.llm.carry import carry, cut_field
from memtrials.memory.base import Lesson, MemoryBlock, StaticEpisode, TaskContext
from memtrials.memory.lessons import trajectory_text
from memtrials.memory.trajectory import VectorIndex, nearest
from memtrials.config.prompts import PromptFiles

if TYPE_CHECKING:
    from memtrials.llm import Client

PROMPT_FILES = ("reflexion_system.md", "reflexion_user.md")
TITLE = "Reflections on your earlier attempts at this task"
CROSS_TITLE = "Reflections on your earlier attempts at this task and at similar tasks"


def prompt_body(text: str) -> str:
    """A prompt file's text without its leading ``<!-- ... -->`` header line (which says
    who wrote it); the header is part of the file's digest, never of the message."""
    lines = text.splitlines()
    while lines and lines[0].lstrip().startswith("<!--"):
        lines = lines[1:]
    return "\n".join(lines).strip("\n")


def load_prompts(prompts_dir: str | Path, names: Sequence[str]) -> PromptFiles:
    """The memories' prompt files ``names`` from ``prompts_dir`` (shipped: ``config/prompts/memory/``)."""
    return PromptFiles.load(prompts_dir, names, what="memory")


class ReflexionView:
    """Serves each episode the reflections kept for its task, and with an ``index`` (cross-task)
    the most similar other tasks' reflections up to ``k`` in all (frozen copy)."""

    step_columns: Sequence[pa.Field] = ()
    episode_columns: Sequence[pa.Field] = (pa.field("n_reflections_served", pa.int64()),
                                           pa.field("synthesis_calls", pa.int64()))

    def __init__(self, reflections: Mapping[str, Sequence[Mapping[str, Any]]], title: str = TITLE,
                 index: VectorIndex | None = None, k: int | None = None) -> None:
        self.reflections = {t: [dict(x) for x in v] for t, v in reflections.items()}
        self.title, self.index, self.k = title, index, k
        if index is not None:  # cross-task: which reflections were served, with their task cosines
            self.episode_columns = (*ReflexionView.episode_columns, pa.field("retrieval", pa.string()))

    def block(self, task_id: str) -> MemoryBlock:
        kept = self.reflections.get(task_id, [])
        return MemoryBlock(tuple(Lesson(x["id"], x["text"]) for x in kept), self.title)

    async def for_episode(self, client: Client, task: TaskContext) -> StaticEpisode:
        if self.index is None or self.k is None:
            block = self.block(task.task_id)
            return StaticEpisode(block, {"n_reflections_served": len(block.lessons), "synthesis_calls": 0})
        own = self.reflections.get(task.task_id, [])[-self.k:] if self.k else []
        others = [x for t, v in self.reflections.items() if t != task.task_id for x in v]
        chosen, info = [], []
        if others and len(own) < self.k:
            chosen, info = nearest(self.index, await self.index.query(client, task.task), others, self.k - len(own))
        if not own and not chosen:
            return StaticEpisode(None, {"n_reflections_served": 0, "synthesis_calls": 0, "retrieval": "[]"})
        lessons = tuple(Lesson(x["id"], x["text"]) for x in own) + tuple(
            Lesson(x["id"], f"(on the task '{x['task']}') {x['text']}") for x in chosen)
        block = MemoryBlock(lessons, CROSS_TITLE if chosen else self.title)
        served = [{"id": x["id"], "cosine": None} for x in own] + info
        return StaticEpisode(block, {"n_reflections_served": len(lessons), "synthesis_calls": 0,
                                     "retrieval": json.dumps(served)})


class ReflexionMemory:
    """See module docstring; ``synthesizer`` is an endpoint name of the registry."""

    kind = "reflexion"

    def __init__(self, *, synthesizer: str, prompts_dir: str | Path, max_reflections: int = 3,
                 max_tokens: int | None = None, obs_chars: int = 300, embedder: str | None = None,
                 k: int | None = None) -> None:
        if max_reflections < 1:
            raise ValueError(f"reflexion: max_reflections must be >= 1, got {max_reflections}")
        if (embedder is None) != (k is None) or (k is not None and int(k) < 1):
            raise ValueError(f"reflexion: cross-task serving needs both an embedder and a budget k >= 1 (or "
                             f"neither: same task only); got embedder={embedder!r}, k={k!r}")
        self.embedder, self.k = embedder, None if k is None else int(k)
        self.index = VectorIndex(embedder) if embedder is not None else None
        self.synthesizer, self.max_reflections = synthesizer, int(max_reflections)
        self.max_tokens, self.obs_chars = max_tokens, int(obs_chars)
        self.prompts = load_prompts(prompts_dir, PROMPT_FILES)
        self.reflections: dict[str, list[dict[str, Any]]] = {}
        self.counter = 0
        self.batches = 0
        self.rejected: list[dict[str, Any]] = []
        self.update_calls: dict[str, int] = {}

    # -- serving ---------------------------------------------------------------
    def frozen(self) -> ReflexionView:
        return ReflexionView(self.reflections, index=None if self.index is None else self.index.copy(), k=self.k)

    # -- learning --------------------------------------------------------------
    def messages(self, episode: Any) -> list[dict[str, str]]:
        s = episode.summary
        prev = self.reflections.get(str(s["task_id"]), [])
        user = prompt_body(self.prompts.texts["reflexion_user.md"]).format(
            task=s["task"], n_steps=len(episode.steps), trajectory=trajectory_text(episode.steps, self.obs_chars),
            previous="\n".join(f"- {x['text']}" for x in prev) if prev else "(none)")
        return [{"role": "system", "content": prompt_body(self.prompts.texts["reflexion_system.md"])},
                {"role": "user", "content": user}]

    async def update(self, client: Client, episodes: Sequence[Any]) -> None:
        failed = [ep for ep in episodes if not ep.summary["won"]]
        replies = await asyncio.gather(*(client.complete(
            self.synthesizer, self.messages(ep), max_tokens=self.max_tokens, purpose="reflexion_reflect")
            for ep in failed))
        for ep, r in zip(failed, replies):  # in episode order
            eid, task_id = str(ep.summary["episode_id"]), str(ep.summary["task_id"])
            self.update_calls[eid] = self.update_calls.get(eid, 0) + 1
            kept_text = carry(" ".join(r.text.split()))
            text = kept_text.text
            if not text:
                self.rejected.append({"batch": self.batches, "episode_id": eid, "call_id": r.call_id,
                                      "error": f"empty reflection (finish_reason {r.finish_reason!r})"})
                continue
            self.counter += 1
            kept = self.reflections.setdefault(task_id, [])
            entry = {"id": f"rx-{self.counter:05d}", "text": text, "episode_id": eid, "call_id": r.call_id,
                     "batch": self.batches, **cut_field(kept_text)}
            if self.index is not None:
                entry["task"] = str(ep.summary["task"])
            kept.append(entry)
            del kept[:-self.max_reflections]
        if self.index is not None:
            await self.index.add(client, [x["task"] for v in self.reflections.values() for x in v])
        self.batches += 1

    # -- state -----------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        out = {"synthesizer": self.synthesizer, "max_reflections": self.max_reflections,
               "max_tokens": self.max_tokens, "obs_chars": self.obs_chars, "prompts": self.prompts.version()}
        if self.index is not None:
            out.update(embedder=self.embedder, k=self.k)
        return out

    def state(self) -> dict[str, Any]:
        return {"settings": self.settings(), "counter": self.counter, "batches": self.batches,
                "reflections": json.loads(json.dumps(self.reflections)),
                "rejected": [dict(x) for x in self.rejected], "update_calls": dict(self.update_calls),
                **({} if self.index is None else {"vectors": self.index.state()})}

    def load(self, state: Mapping[str, Any]) -> None:
        """Adopt a state's reflections and records (this memory's settings are kept)."""
        self.reflections = {str(t): [dict(x) for x in v] for t, v in state["reflections"].items()}
        self.counter, self.batches = int(state["counter"]), int(state["batches"])
        self.rejected = [dict(x) for x in state["rejected"]]
        self.update_calls = {str(k): int(v) for k, v in state["update_calls"].items()}
        if self.index is not None:
            if "vectors" not in state:
                raise ValueError("reflexion: a same-task snapshot (no task vectors) cannot be loaded into a "
                                 "cross-task memory; retrain it with the embedder")
            self.index.load(state["vectors"])
