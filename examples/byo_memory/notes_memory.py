"""A notes memory: after each failed episode, ask the model for one short note; serve the last k notes."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from memtrials.llm import Client
from memtrials.memory.base import FinishedEpisode, FixedView, Lesson, MemoryBlock, MemoryContext

PROMPT = ("An agent did not complete this task.\nTask: {task}\nIts last actions, each with what it returned:\n"
          "{steps}\nWrite one short sentence of advice for the next attempt at a task like this one.")


class NotesMemory:
    kind = "notes"

    def __init__(self, context: MemoryContext, k: int = 3, max_tokens: int = 48) -> None:
        self.endpoint, self.k, self.max_tokens = context.synthesizer, k, max_tokens
        self.notes: list[dict[str, str]] = []

    def playbook(self) -> list[Lesson]:
        return [Lesson(n["id"], n["text"]) for n in self.notes[-self.k:]]

    def frozen(self) -> FixedView:
        lessons = tuple(self.playbook())
        return FixedView(MemoryBlock(lessons, "Notes from earlier attempts") if lessons else None)

    async def update(self, client: Client, episodes: Sequence[FinishedEpisode]) -> None:
        for ep in episodes:
            if ep.summary["won"]:
                continue
            steps = "\n".join(f"- {s['action']} -> {' '.join(str(s['observation']).split())[:150]}"
                              for s in ep.steps[-3:])
            prompt = PROMPT.format(task=ep.summary["task"], steps=steps or "- (none)")
            reply = await client.complete(self.endpoint, [{"role": "user", "content": prompt}],
                                          max_tokens=self.max_tokens, purpose="notes")
            if reply.text.strip():
                self.notes.append({"id": f"note-{len(self.notes) + 1:04d}", "text": " ".join(reply.text.split()),
                                   "episode": str(ep.summary["episode_id"]), "call_id": reply.call_id})

    def state(self) -> dict[str, Any]:
        return {"k": self.k, "notes": [dict(n) for n in self.notes]}

    def load(self, state: Mapping[str, Any]) -> None:
        self.notes = [dict(n) for n in state["notes"]]
