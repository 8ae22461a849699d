"""A lesson log: the smallest memory that learns, one lesson per finished episode.

After every episode (in run order) the ``writer`` endpoint reads the task, the actions
with what each returned and the outcome, and writes one lesson; lessons get stable ids
(``L00001``, ...) in that order and are never removed.  The actor is served the whole log
(a frozen view taken when its batch starts).  The prompts are the project's own
(``config/prompts/memory/``).  It is the platform's reference memory (the runner's tests,
examples); the studies' memories follow the same lifecycle (:mod:`memtrials.memory.base`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from memtrials.llm.carry import carry, cut_field
from memtrials.memory.base import FixedView, Lesson, MemoryBlock
from memtrials.config.prompts import PromptFiles

if TYPE_CHECKING:
    from memtrials.llm import Client

PROMPT_FILES = ("lesson_writer_system.txt", "lesson_writer_user.txt")


def trajectory_text(steps: Sequence[Mapping[str, Any]], max_chars: int = 400) -> str:
    """``Action k: <action>`` / ``Returned: <observation>`` lines of an episode's step rows (an
    action cut to ``carry.max_chars``, as the step row's ``carry_cut`` records)."""
    lines = []
    for st in steps:
        obs = " ".join(str(st["observation"]).split())
        lines.append(f"Action {st['step']}: {carry(str(st['action'])).text}\nReturned: {obs[:max_chars]}")
    return "\n".join(lines) if lines else "(no actions)"


class LessonLog:
    """See module docstring; ``writer`` is an endpoint name of the registry."""

    kind = "lesson_log"

    def __init__(self, writer: str, prompts_dir: str | Path, *, max_tokens: int | None = None,
                 title: str = "Lessons from earlier tasks") -> None:
        self.writer, self.max_tokens, self.title = writer, max_tokens, title
        self.prompts = PromptFiles.load(prompts_dir, PROMPT_FILES, what="memory")
        self.lessons: list[dict[str, str]] = []

    @staticmethod
    def block_of(lessons: Sequence[Mapping[str, str]], title: str = "Lessons from earlier tasks") -> MemoryBlock:
        return MemoryBlock(tuple(Lesson(x["id"], x["text"]) for x in lessons), title)

    def block(self) -> MemoryBlock:
        return self.block_of(self.lessons, self.title)

    def frozen(self) -> FixedView:
        return FixedView(self.block())

    def playbook(self) -> list[Lesson]:
        """The whole log, in order (:class:`memtrials.memory.base.PlaybookMemory`)."""
        return list(self.block().lessons)

    def messages(self, episode: Any) -> list[dict[str, str]]:
        s = episode.summary
        user = self.prompts.texts["lesson_writer_user.txt"].format(
            task=s["task"], outcome="completed" if s["won"] else "not completed", n_steps=s["n_steps"],
            trajectory=trajectory_text(episode.steps))
        return [{"role": "system", "content": self.prompts.texts["lesson_writer_system.txt"].strip()},
                {"role": "user", "content": user.rstrip("\n")}]

    async def update(self, client: Client, episodes: Sequence[Any]) -> None:
        replies = await asyncio.gather(*(client.complete(self.writer, self.messages(ep), max_tokens=self.max_tokens,
                                                         purpose="memory_update") for ep in episodes))
        for ep, r in zip(episodes, replies):
            kept = carry(" ".join(r.text.split()))
            if kept.text:  # an empty reply writes no lesson (its call stays recorded)
                self.lessons.append({"id": f"L{len(self.lessons) + 1:05d}", "text": kept.text,
                                     "source": str(ep.summary["episode_id"]), "call_id": r.call_id,
                                     **cut_field(kept)})

    def state(self) -> dict[str, Any]:
        return {"writer": self.writer, "lessons": [dict(x) for x in self.lessons]}

    def load(self, state: Mapping[str, Any]) -> None:
        self.lessons = [dict(x) for x in state["lessons"]]
