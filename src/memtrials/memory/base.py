"""The memory interface: what a memory class provides, what it is given, what the studies ask of it.

Every memory of the studies (ACE and Dynamic Cheatsheet playbooks, trajectory and
abstraction stores, the anti-persistence selector's outcome log, the baselines) and a
user's own memory class (``docs/memory.md``; named in the config's ``memory:`` section,
:mod:`memtrials.memory.registry`) implement this one interface.  A user's class needs
nothing of the package but this module (and :class:`memtrials.llm.Client` as a type).

**The lifecycle** (:class:`Memory`; every protocol):

- ``kind`` -- a class attribute, a string naming what the state holds (a snapshot of one
  kind is never loaded into another);
- :meth:`Memory.frozen` -- a :class:`MemoryView` that serves without changing (the runner
  gives every episode of a batch the view taken at the batch's start);
- :meth:`Memory.update` ``(client, episodes)`` -- learning after a batch of finished
  episodes (:class:`FinishedEpisode`, in run order), every model call through ``client``;
- :meth:`Memory.state` / :meth:`Memory.load` -- everything the memory knows as plain JSON
  data, and back (:mod:`memtrials.memory.snapshot` makes it content-addressed and writes
  it as a pipeline artifact; a killed stream resumes from its last one; a frozen
  evaluation checks that serving left it unchanged).

**Serving.**  :meth:`MemoryView.for_episode` builds, once per episode, an
:class:`EpisodeMemory` whose :meth:`~EpisodeMemory.at_step` returns a :class:`Served`: the
:class:`MemoryBlock` shown in that step's prompt (lessons with ids; the runner records
the ids in the step table's ``memory_ids``) and the values of the step columns the view
declares; the episode's ``columns`` fill its declared episode columns.  A memory that
shows one fixed block returns ``FixedView(block)`` (:class:`FixedView`).

**The model client.**  ``update`` and ``for_episode`` get the job's client
(:class:`memtrials.llm.Client`): ``await client.complete(endpoint, messages,
max_tokens=..., purpose=...)`` (a :class:`memtrials.llm.ChatResult`: ``text``,
``call_id``), ``client.complete_json(endpoint, messages, schema, ...)`` and
``client.embed(endpoint, texts, purpose=...)`` (``vectors``).  Every call is cached
(the same request replays, so a rerun writes identical outputs) and recorded in the
job's ``.calls.parquet`` with its ``purpose``; a memory makes no model call any other
way.  Which endpoints to call is the :class:`MemoryContext`'s.

**What each study asks.**  The anti-persistence study trains a design on streams and
evaluates it frozen, the history study's continuation serves it at resumption: both need
the lifecycle only.  The playbook study measures and curates a memory's lessons, so a
growth system also provides :meth:`PlaybookMemory.playbook` (every lesson it holds, with
its section and counts).  Optional, read by the anti-persistence study's call counts:
``update_calls`` (episode id -> model calls made for it in ``update``) and ``rejected``
lists in the state (replies the memory could not use).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:  # the model layer's type only (memory never imports the agent layer above it)
    import pyarrow as pa

    from memtrials.llm import Client


@dataclass(frozen=True)
class Lesson:
    """One memory item: ``id`` is what step records keep (unique within a block, stable for
    the memory's life), ``text`` what the actor reads.

    ``section`` and ``counts`` are for the playbook study's records
    (:meth:`PlaybookMemory.playbook`): the lesson's section (ACE's slugs; none: the
    memory's ``kind``) and the counts the memory keeps of it (ACE's ``helpful``,
    ``harmful``, ``neutral`` tags; Dynamic Cheatsheet's ``uses``).  Serving ignores both.
    """

    id: str
    text: str
    section: str | None = None
    counts: Mapping[str, int] = field(default_factory=dict, compare=False)


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
class MemoryContext:
    """What a study tells a user's memory when it builds one: ``Class(context=..., **options)``.

    ``name``: the memory's name in the config's ``memory:`` section; ``study``:
    ``playbook``, ``antipersist`` or ``history``; ``env``: the benchmark;
    ``synthesizer``: the chat endpoint for the memory's own calls (playbook: the Curator's,
    ``roles.curator``; anti-persistence: ``antipersist.synthesizer`` or the backbone;
    history: the actor being continued); ``embedder``: the embedding endpoint
    (``roles.embedder``); ``seed``: for the memory's own random draws (a study's seed and
    the job's names, :func:`memtrials.seeds.seed_of`).
    """

    name: str
    study: str
    env: str
    synthesizer: str
    embedder: str
    seed: int


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


class HistoryEntry(Protocol):
    """One completed history entry as an episode hands it over (the agent layer's ``Entry``):
    ``action`` was chosen on ``observation``; ``experience`` is what a review derived from it
    (``None``: none)."""

    observation: str
    action: str
    experience: str | None


class FinishedEpisode(Protocol):
    """What :meth:`Memory.update` is given per episode (:class:`memtrials.agent.actor.Episode`).

    - ``summary``: ``episode_id``, ``task_id``, ``task`` (its text), ``won`` (bool),
      ``final_score`` (the environment's score), ``n_steps``, ``termination`` (``won``,
      ``done``, ``budget``, ``context_exceeded``), ``seed``, ``initial_observation``, and
      the study's episode columns;
    - ``steps``: one row per action (``memtrials.agent.records.STEP_SCHEMA``): ``step``
      (1-based), ``obs_before`` (the observation the action was chosen on), ``action``,
      ``observation`` (what it returned), ``reward``, ``score``, ``done``, ``won``,
      ``memory_ids`` (JSON list of the lesson ids served at that step), ``call_id``, ...;
    - ``entries``: the history as (observation, action, experience) entries;
    - ``final_info``: the last observation's ``info`` (e.g. AppWorld's unit-test results
      under ``tests``).
    """

    summary: dict[str, Any]
    steps: list[dict[str, Any]]
    entries: Sequence[HistoryEntry]
    final_info: dict[str, Any]


class EpisodeMemory(Protocol):
    """What one episode is served (built by :meth:`MemoryView.for_episode`)."""

    columns: Mapping[str, Any]
    """Values of the memory's declared episode columns (an arm, a propensity, ...)."""

    def at_step(self, ctx: StepContext) -> Served: ...


class MemoryView(Protocol):
    """A frozen memory: serves episodes, never changes.

    ``step_columns`` / ``episode_columns``: ``pyarrow`` fields the memory adds to the step
    and episode tables (empty for most).  ``for_episode`` may call the model (guidance
    synthesized for this task), through ``client``.
    """

    step_columns: "Sequence[pa.Field]"
    episode_columns: "Sequence[pa.Field]"

    async def for_episode(self, client: "Client", task: TaskContext) -> EpisodeMemory: ...


@runtime_checkable
class Memory(Protocol):
    """A memory that learns (the lifecycle of the module docstring).

    A user's class is built as ``Class(context=MemoryContext(...), **options)`` (its
    config entry's options; :mod:`memtrials.memory.registry`).
    """

    kind: str

    def frozen(self) -> MemoryView: ...

    async def update(self, client: "Client", episodes: Sequence[FinishedEpisode]) -> None:
        """Learn from finished episodes (in run order); an empty batch is never given."""
        ...

    def state(self) -> dict[str, Any]:
        """Everything the memory knows, as plain JSON data (sorted keys are applied on write)."""
        ...

    def load(self, state: Mapping[str, Any]) -> None:
        """Replace what the memory knows by a :meth:`state`."""
        ...


@runtime_checkable
class PlaybookMemory(Memory, Protocol):
    """A memory the playbook study can grow, measure and curate."""

    def playbook(self) -> Sequence[Lesson]:
        """Every lesson the memory holds, as it would serve them as a playbook, in playbook
        order: distinct ids, non-empty texts, with ``section`` and ``counts`` where it keeps
        them.  After each growth pass the study records them (one row per lesson), counts
        their tokens, clusters them into blocks, measures the blocks in a practice round and
        serves curated subsets; the memory is not consulted again."""
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
    playbook at evaluation); ``None`` serves nothing."""

    block: MemoryBlock | None
    step_columns: Sequence[Any] = ()
    episode_columns: Sequence[Any] = ()

    async def for_episode(self, client: "Client", task: TaskContext) -> EpisodeMemory:
        return StaticEpisode(self.block)


def fixed(block: MemoryBlock) -> FixedView:
    """A view that shows ``block`` at every step of every episode."""
    return FixedView(block)
