"""Reference-history continuation from a shared restored state.

*When History Fails to Become Experience*, section 3, section 6.3 and Appendices D.6, F.2.
Unsuccessful Raw rollouts are the sources.  For a source of length ``L`` the environment
is restored by replay to ``k = floor(L/3)`` (every replayed observation checked against
its record), and the source actor continues with up to 30 new actions under:

- ``raw``: the actual history through ``k`` only;
- ``reference``: plus the recorded segment ``k+1 .. m`` (``m = floor(2L/3)``: those actions
  and their returned observations) in a delimited block marked as not executed, its
  records numbered ``1..m-k`` and labelled ``Reference Observation`` / ``Reference Action``
  apart from the executed steps (:func:`memtrials.agent.views.reference`);
- ``causal_reference``: the same with every returned observation labelled as its
  action's outcome (reference records as ``Reference Action`` / ``Outcome of Reference
  Action``);
- ``experience``: ``reference`` plus one experience written by the actor at resumption,
  from a review of what was executed in the restored environment: the latest completed
  transition is the last replayed action ``A_k`` and the observation it returned (the
  restored state), reviewed with the reference-augmented history in view; the experience
  is kept beside that transition (Appendix D.2: beside its source transition);
- ``calibrator``: ``reference`` with the endpoint of the ``calibrator`` role reviewing
  every non-terminal continuation transition (Appendix G.2 interface);
- ``memory-<name>``: ``raw`` plus a user's memory (the config's ``memory:`` section,
  :mod:`memtrials.memory.registry`) served at every step.  Before any continuation a fresh
  memory learns, in one ``update``, from the cell's sources each cut after step ``m``: the
  same records the ``reference`` condition shows, as episodes (:func:`source_episodes`);
  then it is frozen, its snapshot written, and its view served to every continuation (a
  project choice: the memory gets the reference segment's information, not the history).

In the chat format (``-chat``, Appendix F.2) the reference block is its own user message
after the prefix's messages, the current observation and actions a separate user message
after it, and newly executed steps continue as user/assistant messages.

Recovery = terminal success within the budget.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pandas as pd

from memtrials.agent.render import Segment
from memtrials.agent.views import Entry, Item, ViewResult, causal, current_label, experience, raw, reference
from memtrials.memory.registry import memory_name
from memtrials.seeds import order_key, seed_of

if TYPE_CHECKING:
    from memtrials.agent.prompts import ActorPrompts
    from memtrials.envs.base import Env, Observation
    from memtrials.llm import Client
    from memtrials.memory.base import MemoryView

@dataclass(frozen=True)
class Source:
    """One unsuccessful source trajectory and its split points."""

    episode_id: str
    task_id: str
    seed: int
    initial_observation: str
    actions: tuple[str, ...]          # executed actions A_1..A_L
    replay: tuple[str, ...]           # what replays each step exactly
    observations: tuple[str, ...]     # O_2..O_{L+1} (returned by each action)
    task: str = ""

    @property
    def length(self) -> int:
        return len(self.actions)

    @property
    def k(self) -> int:
        return self.length // 3

    @property
    def m(self) -> int:
        return 2 * self.length // 3

    def obs(self, t: int) -> str:
        """O_t (1-based): O_1 is the initial observation."""
        return self.initial_observation if t == 1 else self.observations[t - 2]

    def prefix_entries(self) -> list[Entry]:
        return [Entry(self.obs(t), self.actions[t - 1]) for t in range(1, self.k + 1)]

    def reference_entries(self) -> list[Entry]:
        """Entries k+1..m: each reference action with the observation it was chosen on."""
        return [Entry(self.obs(t), self.actions[t - 1]) for t in range(self.k + 1, self.m + 1)]

    def reference_outcome(self) -> str:
        """O_{m+1}: what the last reference action returned."""
        return self.obs(self.m + 1)


def select_sources(episodes: pd.DataFrame, steps: pd.DataFrame, n: int, seed: int,
                   min_length: int = 3) -> list[Source]:
    """Up to ``n`` unsuccessful sources (length >= ``min_length``), in a seeded order."""
    ok = episodes[(~episodes["won"]) & (episodes["n_steps"] >= min_length)
                  & (episodes["termination"].isin(["budget", "done"]))]
    ids = sorted(ok["episode_id"], key=lambda e: order_key(seed, e))[:n]
    out = []
    for eid in ids:
        ep = ok[ok["episode_id"] == eid].iloc[0]
        st = steps[steps["episode_id"] == eid].sort_values("step")
        if list(st["step"]) != list(range(1, len(st) + 1)) or len(st) != int(ep["n_steps"]):
            raise ValueError(f"steps of source {eid} are incomplete ({len(st)} of {int(ep['n_steps'])})")
        out.append(Source(eid, str(ep["task_id"]), int(ep["seed"]), str(ep["initial_observation"]),
                          tuple(st["action"]), tuple(st["replay_action"]), tuple(st["observation"]),
                          str(ep["task"])))
    return out


def restore(env: Env, src: Source) -> Observation:
    """Replay the first ``k`` actions, checking each observation; return the observation at k."""
    k = src.k
    obs = env.restore(src.task_id, list(src.replay[:k]), list(src.observations[:k]))
    if obs.text != src.obs(k + 1):
        raise RuntimeError(f"restore of {src.episode_id} at step {k}: observation differs from the record")
    return obs


@dataclass
class ContinuationComposer:
    """The history a continuation shows (see module docstring for the conditions)."""

    condition: str
    src: Source
    resume_experience: str | None = None
    chat: bool = False
    start: int = field(init=False)

    def __post_init__(self) -> None:
        self.start = self.src.k + 1

    def _prefix(self, causal_labels: bool, with_experience: bool) -> Segment:
        """The executed history through ``k``; the resumption experience beside transition k."""
        pre = causal(self.src.prefix_entries()) if causal_labels else raw(self.src.prefix_entries())
        items = list(pre.items)
        if with_experience and self.resume_experience and items:
            last = items[-1]
            items[-1] = Item(last.index, last.obs_label, last.observation, last.action_label, last.action,
                             self.resume_experience)
        return Segment(items=tuple(items))

    def _reference(self, causal_labels: bool) -> Segment:
        return Segment.of(reference(self.src.reference_entries(), self.src.reference_outcome(),
                                    restored_step=self.src.k, causal_labels=causal_labels))

    def segments(self, entries: Sequence[Entry], prompts: ActorPrompts, causal_labels: bool, *,
                 chat: bool | None = None, with_experience: bool = True) -> list[Segment]:
        prefix = self.src.prefix_entries()
        if self.condition == "raw":
            view = causal(prefix + list(entries)) if causal_labels else experience(prefix + list(entries))
            return [Segment.of(view)]
        cont: ViewResult | None = None
        if entries:
            cont = causal(entries, start=self.start, initial=False) if causal_labels \
                else experience(entries, start=self.start)
        segs = prompts.reference_segments(self._prefix(causal_labels, with_experience), self._reference(causal_labels),
                                          Segment.of(cont) if cont else None, self.src.k)
        if self.chat if chat is None else chat:
            # Appendix F.2: the prefix's messages, the reference block as its own user message,
            # then executed steps as user/assistant messages (no block-format separator lines)
            segs = [s for s in segs if s.reference or s.items]
        return segs

    def bind(self, prompts: ActorPrompts) -> "BoundComposer":
        return BoundComposer(self, prompts)


@dataclass
class BoundComposer:
    """A :class:`ContinuationComposer` with its prompt set (the actor loop's Composer)."""

    inner: ContinuationComposer
    prompts: ActorPrompts

    @property
    def start(self) -> int:
        return self.inner.start

    def actor(self, entries: Sequence[Entry]) -> tuple[list[Segment], str, None]:
        causal_labels = self.inner.condition == "causal_reference"
        segs = self.inner.segments(entries, self.prompts, causal_labels)
        label = current_label("causal" if causal_labels else "raw", self.inner.src.k + len(entries))
        return segs, label, None

    def review(self, entries: Sequence[Entry]) -> list[Segment]:
        """The reviewer's history (ordinary labels, block format, no experiences), through the
        latest executed transition (the last of ``entries``, or ``A_k`` when there are none)."""
        plain = [Entry(e.observation, e.action) for e in entries]
        return self.inner.segments(plain, self.prompts, False, chat=False, with_experience=False)


def resume_transition(src: Source) -> tuple[str, str] | None:
    """The latest transition executed in the restored environment: ``(A_k, O_{k+1})``
    (``None`` when nothing was executed, ``k = 0``)."""
    if src.k < 1:
        return None
    return src.actions[src.k - 1], src.obs(src.k + 1)


CONTINUATION_SCHEMA_FIELDS = (
    ("source_episode_id", "string"), ("source_length", "int64"), ("restored_step", "int64"),
    ("reference_end", "int64"), ("resume_review_call_id", "string"), ("resume_experience", "string"),
    ("calibrator", "string"),
)
"""Per-continuation columns; ``calibrator`` names the endpoint that played the calibrator
role (null outside the Calibrator condition): tables label its rows by it."""


def served_memory(condition: str) -> tuple[str, bool] | None:
    """``memory-<name>`` -> (``memory-<name>``, False); ``memory-<name>-chat`` -> (``memory-<name>``,
    True); ``None`` for a condition that serves no user memory."""
    if memory_name(condition) is None:
        return None
    chat = condition.endswith("-chat") and condition != "memory-chat"
    return (condition.removesuffix("-chat") if chat else condition), chat


def source_episodes(sources: Sequence[Source], episodes_path: str, steps_path: str) -> list[Any]:
    """Each source as a finished episode cut after step ``m`` (what the ``reference`` condition
    shows): its Raw step rows 1..m, its Raw summary with ``n_steps`` m, ``won`` false and
    ``termination`` ``cut``."""
    import pyarrow.parquet as pq

    from memtrials.agent.actor import Episode

    summaries = {r["episode_id"]: r for r in pq.read_table(episodes_path).to_pylist()}
    rows = [r for r in pq.read_table(steps_path).to_pylist() if r["episode_id"] in {s.episode_id for s in sources}]
    out = []
    for src in sources:
        steps = sorted((r for r in rows if r["episode_id"] == src.episode_id), key=lambda r: r["step"])[: src.m]
        summary = {**summaries[src.episode_id], "n_steps": len(steps), "won": False, "termination": "cut"}
        out.append(Episode(steps=steps, summary=summary, entries=[Entry(r["obs_before"], r["action"]) for r in steps]))
    return out


async def learned_view(client: Client, entry: Mapping[str, Any], sources: Sequence[Source], *, model: str, env: str,
                       condition: str, seed: int, embedder: str, episodes_path: str, steps_path: str,
                       out_memory: str) -> MemoryView:
    """A fresh user memory (config slice ``entry``; the actor being continued synthesizes,
    ``embedder`` embeds) that learned from the cut sources (:func:`source_episodes`), its
    snapshot written to ``out_memory``; its frozen view."""
    from memtrials.memory.base import MemoryContext
    from memtrials.memory.registry import build
    from memtrials.memory.snapshot import write_snapshot

    memory = build(entry, MemoryContext(name=str(entry["name"]), study="history", env=env, synthesizer=model,
                                        embedder=embedder, seed=seed_of(seed, "memory", env, condition)))
    episodes = source_episodes(sources, episodes_path, steps_path)
    if episodes:
        await memory.update(client, episodes)
    write_snapshot(out_memory, memory, sources=[s.episode_id for s in sources], condition=condition, model=model,
                   env=env)
    return memory.frozen()


def continuation_schema() -> Any:
    import pyarrow as pa

    from memtrials.agent.records import EPISODE_SCHEMA

    schema = EPISODE_SCHEMA
    for name, typ in CONTINUATION_SCHEMA_FIELDS:
        schema = schema.append(pa.field(name, getattr(pa, typ)()))
    return schema


async def continuation_cell(
    config: Any, *, model: str, env: str, condition: str, episodes_path: str, steps_path: str,
    n_sources: int, seed: int, settings: Any, actor_prompts_dir: str, in_flight: int, out_episodes: str,
    out_steps: str, out_calls: str, calibrator: str | None = None, min_length: int = 3,
    env_options: Any = None, make_env: Any = None, memory: Mapping[str, Any] | None = None,
    embedder: str | None = None, out_memory: str | None = None,
) -> pd.DataFrame:
    """Continue every selected source of one (model, env) Raw cell under ``condition``; a
    ``memory-<name>`` condition serves the user memory of config slice ``memory``
    (:func:`memtrials.memory.registry.memory_entry`; ``embedder`` its embedding endpoint)
    and writes its snapshot to ``out_memory``."""
    import asyncio
    import dataclasses

    from memtrials.agent.job import open_job
    from memtrials.agent.prompts import ActorPrompts
    from memtrials.agent.review import review_transition
    from memtrials.agent.records import STEP_SCHEMA
    from memtrials.agent.runner import EpisodeSpec, episode_schema, write_episodes
    from memtrials.studies.history.design import CONTINUATION_CONDITIONS

    served = served_memory(condition)
    if served is not None:  # memory-<name>[-chat]
        base_cond, chat = "memory", served[1]
        if not (memory and embedder and out_memory):
            raise ValueError(f"continuation condition {condition!r} needs its memory's config slice, an embedder "
                             "and an output path for its snapshot")
    else:
        base_cond, sep, fmt = condition.partition("-")
        if base_cond not in CONTINUATION_CONDITIONS or (sep and fmt != "chat"):
            raise ValueError(f"unknown continuation condition {condition!r}; known: "
                             f"{', '.join(CONTINUATION_CONDITIONS)} (each optionally followed by '-chat'), "
                             "memory-<name>")
        chat = fmt == "chat"
    if base_cond == "calibrator" and not calibrator:
        raise ValueError("continuation condition 'calibrator' needs an endpoint in roles.calibrator")
    sources = select_sources(pd.read_parquet(episodes_path), pd.read_parquet(steps_path), n_sources, seed, min_length)
    prompts = ActorPrompts.load(actor_prompts_dir)
    cell = f"history/continuation/{model}/{env}/{condition}"
    base = {"raw": "raw", "causal_reference": "causal_reference", "memory": "raw"}.get(base_cond, "reference")
    settings = dataclasses.replace(settings, review=base_cond == "calibrator", fmt="chat" if chat else "block",
                                   review_model=calibrator if base_cond == "calibrator" else None)
    async with open_job(config, cell, out_calls, prompts, env=env, in_flight=in_flight, episodes=len(sources),
                        env_options=env_options, make_env=make_env) as (runner, client):
        resume: dict[str, tuple[str | None, str | None]] = {}
        if base_cond == "experience":
            async def review(src: Source) -> None:
                latest = resume_transition(src)
                if latest is None:  # nothing executed before resumption: nothing to review
                    return
                comp = ContinuationComposer("reference", src).bind(prompts)
                r = await review_transition(
                    client, prompts, model, env=env, task=src.task, history=comp.review([]),
                    action=latest[0], observation=latest[1],
                    max_tokens=settings.review_max_tokens or settings.max_output_tokens)
                resume[src.episode_id] = (r.call_id, r.experience)
            await asyncio.gather(*(review(s) for s in sources))
        view = None
        if memory and embedder and out_memory and served is not None:
            view = await learned_view(client, memory, sources, model=model, env=env, condition=condition, seed=seed,
                                      embedder=embedder, episodes_path=episodes_path, steps_path=steps_path,
                                      out_memory=out_memory)
        specs = []
        for src in sources:
            call_id, exp = resume.get(src.episode_id, (None, None))
            specs.append(EpisodeSpec(
                env, src.task_id, f"{cell}/{src.task_id}", src.seed, settings,
                composer=ContinuationComposer(base, src, exp, chat).bind(prompts),
                prepare=lambda e, s=src: restore(e, s)))
        client.expect(len(specs) * settings.max_actions * (2 if settings.review else 1))
        episodes = await runner.concurrent(specs, view)
    extra = [{"source_episode_id": s.episode_id, "source_length": s.length, "restored_step": s.k,
              "reference_end": s.m, "resume_review_call_id": resume.get(s.episode_id, (None, None))[0],
              "resume_experience": resume.get(s.episode_id, (None, None))[1],
              "calibrator": calibrator if base_cond == "calibrator" else None} for s in sources]
    schema, step_schema = continuation_schema(), STEP_SCHEMA
    if view is not None:  # the columns a user's memory declares
        schema = episode_schema(view.episode_columns, schema)
        step_schema = episode_schema(view.step_columns, step_schema)
    return write_episodes(episodes, {"model": model, "env": env, "condition": condition},
                          {s.task_id: i for i, s in enumerate(sources)}, out_episodes, out_steps,
                          extra=extra, schema=schema, step_schema=step_schema)

