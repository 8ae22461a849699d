"""Memory systems and the lifecycle they share (:mod:`hindsight.memory.base`).

A study serves a :class:`MemoryView` to the runner (:mod:`hindsight.agent.runner`), which
records the served lesson ids per step; a :class:`Memory` learns between batches of a
stream and is snapshotted (:mod:`hindsight.memory.snapshot`).  Memories:
:mod:`~hindsight.memory.lessons` (the reference lesson log), :mod:`~hindsight.memory.ace`
(ACE playbook), :mod:`~hindsight.memory.cheatsheet` (Dynamic Cheatsheet); retrieval by
embedding: :mod:`~hindsight.memory.retrieval`; the anti-persistence study's designs:
:mod:`~hindsight.memory.trajectory` (trajectory memory), :mod:`~hindsight.memory.abstraction`
(abstraction and joint memory), :mod:`~hindsight.memory.antipersist` (anti-persistence, with
the mode selector of :mod:`hindsight.stats.bandit`).
"""

from hindsight.memory.base import (
    EpisodeMemory, FixedView, Lesson, Memory, MemoryBlock, MemoryView, Served, StaticEpisode, StepContext,
    TaskContext, fixed,
)

__all__ = [
    "EpisodeMemory", "FixedView", "Lesson", "Memory", "MemoryBlock", "MemoryView", "Served", "StaticEpisode",
    "StepContext", "TaskContext", "fixed",
]
