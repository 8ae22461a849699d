"""A memory with a lifecycle: what the actor is shown, how it learns, how it is saved.

Every memory system of the studies (ACE and Dynamic Cheatsheet playbooks, trajectory and
abstraction stores, the anti-persistence selector's outcome log) is a :class:`Memory`:

- :meth:`Memory.frozen` -- a :class:`MemoryView` that serves without changing: the
  runner gives every episode of a batch (or of a concurrent run) the view taken at the
  batch's start;
- :meth:`MemoryView.for_episode` -- what one episode is served: an :class:`EpisodeMemory`
  whose :meth:`~EpisodeMemory.at_step` returns the block for each step (lessons with
  stable ids; the runner records the ids and the columns the memory declares), built
  once per episode (retrieval by embedding, a bandit's choice and its propensity,
  guidance synthesized for this task and dropped when the episode ends);
- :meth:`Memory.update` -- learning after an episode or a batch, with model calls made
  through :mod:`memtrials.llm` (cached, recorded, cost-capped);
- :meth:`Memory.state` / :meth:`Memory.load` -- a plain-JSON snapshot
  (:mod:`memtrials.memory.snapshot` makes it content-addressed and writes it as a
  pipeline artifact; a killed stream resumes from its last one).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence

if TYPE_CHECKING:  # the agent layer sits above memory; only its types are named here
    import pyarrow as pa

    from memtrials.llm import Client


@dataclass(frozen=True)
class Lesson:
    """One memory item: ``id`` is what step records keep, ``text`` what the actor reads."""

    id: str
    text: str


@dataclass(frozen=True)
class MemoryBlock:
    """A titled list of lessons; rendered as ``title:`` and one ``- text`` line per lesson.

    ``text`` (optional) replaces the rendering for memories that serve free text (a
    synthesized guidance, retrieved trajectories): ids still name what it was built from.
    """

    lessons: tuple[Lesson, ...] = ()
    title: str = "Lessons from earlier tasks"
    text: str | None = None

    def __post_init__(self) -> None:
        ids = [lesson.id for lesson in self.lessons]
        if len(set(ids)) != len(ids):
            dup = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"memory block: duplicate lesson ids {dup}")

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(lesson.id for lesson in self.lessons)

    def render(self) -> str:
        """The text placed in the prompt (empty for an empty block)."""
        if self.text is not None:
            return self.text if not self.text or self.text.endswith("\n") else self.text + "\n"
        if not self.lessons:
            return ""
        return self.title + ":\n" + "\n".join(f"- {lesson.text}" for lesson in self.lessons) + "\n"


@dataclass(frozen=True)
class TaskContext:
    """What a memory may look at when an episode starts."""

    env: str
    task_id: str
    task: str
    episode_id: str
    seed: int | str = 0
    initial_observation: str = ""


@dataclass(frozen=True)
class StepContext:
    """What a memory may look at to choose the block for one step."""

    env: str
    task_id: str
    task: str
    step: int
    observation: str
    history: Sequence[object] = ()


@dataclass
class Served:
    """The block of one step and the values of the memory's declared step columns."""

    block: MemoryBlock | None
    columns: Mapping[str, Any] = field(default_factory=dict)


class EpisodeMemory(Protocol):
    """What one episode is served (built by :meth:`MemoryView.for_episode`)."""

    columns: Mapping[str, Any]
    """Values of the memory's declared episode columns (an arm, a propensity, ...)."""

    def at_step(self, ctx: StepContext) -> Served: ...


class MemoryView(Protocol):
    """A frozen memory: serves episodes, never changes."""

    step_columns: "Sequence[pa.Field]"
    episode_columns: "Sequence[pa.Field]"

    async def for_episode(self, client: "Client", task: TaskContext) -> EpisodeMemory: ...


class Memory(Protocol):
    """A memory that learns (see module docstring)."""

    kind: str

    def frozen(self) -> MemoryView: ...

    async def update(self, client: "Client", episodes: Sequence[Any]) -> None:
        """Learn from finished episodes (:class:`memtrials.agent.actor.Episode`, in run order)."""
        ...

    def state(self) -> dict[str, Any]:
        """Everything the memory knows, as plain JSON data (sorted keys are applied on write)."""
        ...

    def load(self, state: Mapping[str, Any]) -> None:
        """Replace what the memory knows by a :meth:`state`."""
        ...


@dataclass
class StaticEpisode:
    """An :class:`EpisodeMemory` that shows the same block at every step."""

    block: MemoryBlock | None
    columns: Mapping[str, Any] = field(default_factory=dict)
    step_values: Mapping[str, Any] = field(default_factory=dict)

    def at_step(self, ctx: StepContext) -> Served:
        return Served(self.block, self.step_values)


@dataclass
class FixedView:
    """A :class:`MemoryView` that serves one fixed block to every episode (e.g. a curated
    playbook at evaluation)."""

    block: MemoryBlock | None
    step_columns: Sequence[Any] = ()
    episode_columns: Sequence[Any] = ()

    async def for_episode(self, client: Any, task: TaskContext) -> EpisodeMemory:
        return StaticEpisode(self.block)


def fixed(block: MemoryBlock) -> FixedView:
    """A view that shows ``block`` at every step of every episode."""
    return FixedView(block)
