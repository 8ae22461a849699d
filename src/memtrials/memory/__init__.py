"""Memory systems and the interface they share (:mod:`memtrials.memory.base`).

A study serves a :class:`MemoryView` to the runner (:mod:`memtrials.agent.runner`), which
records the served lesson ids per step; a :class:`Memory` learns between batches of a
stream and is snapshotted (:mod:`memtrials.memory.snapshot`).  Memories are named in
:mod:`memtrials.memory.registry` (built-in ones, and a user's own class named in the
config's ``memory:`` section; ``docs/memory.md``).  Memories:
:mod:`~memtrials.memory.lessons` (the reference lesson log), :mod:`~memtrials.memory.ace`
(ACE playbook), :mod:`~memtrials.memory.cheatsheet` (Dynamic Cheatsheet); retrieval by
embedding: :mod:`~memtrials.memory.retrieval`; the anti-persistence study's designs:
:mod:`~memtrials.memory.trajectory` (trajectory memory), :mod:`~memtrials.memory.abstraction`
(abstraction and joint memory), :mod:`~memtrials.memory.antipersist` (anti-persistence, with
the mode selector of :mod:`memtrials.stats.bandit`).
"""

from memtrials.memory.base import (
    EpisodeMemory, FinishedEpisode, FixedView, Lesson, Memory, MemoryBlock, MemoryContext, MemoryView,
    PlaybookMemory, Served, StaticEpisode, StepContext, TaskContext, fixed,
)

__all__ = [
    "EpisodeMemory", "FinishedEpisode", "FixedView", "Lesson", "Memory", "MemoryBlock", "MemoryContext",
    "MemoryView", "PlaybookMemory", "Served", "StaticEpisode", "StepContext", "TaskContext", "fixed",
]
