"""The actor's memory block: lessons or retrieved trajectories rendered into its prompt.

The history study runs without memory; the playbook-curation and anti-persistence
studies plug in here.  A block is a list of :class:`Lesson` s with stable ids; the actor
records, for every step, the ids of the lessons its prompt contained.  A
:class:`MemoryProvider` may choose a different block at every step (retrieval by the
current task and observation).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Lesson:
    """One memory item: ``id`` is what step records keep, ``text`` what the actor reads."""

    id: str
    text: str


@dataclass(frozen=True)
class MemoryBlock:
    """A titled list of lessons; rendered as ``title:`` and one ``- text`` line per lesson."""

    lessons: tuple[Lesson, ...] = ()
    title: str = "Lessons from earlier tasks"

    def __post_init__(self) -> None:
        ids = [l.id for l in self.lessons]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"memory block: duplicate lesson ids {dup}")

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(l.id for l in self.lessons)

    def render(self) -> str:
        """The text placed in the prompt (empty for an empty block)."""
        if not self.lessons:
            return ""
        return self.title + ":\n" + "\n".join(f"- {l.text}" for l in self.lessons) + "\n"


@dataclass(frozen=True)
class StepContext:
    """What a provider may look at to choose the block for one step."""

    env: str
    task_id: str
    task: str
    step: int
    observation: str
    history: Sequence[object] = ()


class MemoryProvider(Protocol):
    """Returns the memory block for one step (``None`` for no memory)."""

    def __call__(self, ctx: StepContext) -> MemoryBlock | None: ...


def fixed(block: MemoryBlock) -> MemoryProvider:
    """A provider that shows the same block at every step."""

    def provider(ctx: StepContext) -> MemoryBlock | None:
        return block

    return provider
