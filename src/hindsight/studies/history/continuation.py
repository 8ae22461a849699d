"""Reference-history continuation from a shared restored state.

*When History Fails to Become Experience*, section 3, section 6.3 and Appendices D.6, F.2.
Unsuccessful Raw rollouts are the sources.  For a source of length ``L`` the environment
is restored by replay to ``k = floor(L/3)`` (every replayed observation checked against
its record), and the source actor continues with up to 30 new actions under:

- ``raw``: the actual history through ``k`` only;
- ``reference``: plus the recorded segment ``k+1 .. m`` (``m = floor(2L/3)``: those actions
  and their returned observations) in a delimited block marked as not executed;
- ``causal_reference``: the same with every returned observation labelled as its
  action's outcome (reference records as ``Reference Action`` / ``Outcome of Reference
  Action``);
- ``experience``: ``reference`` plus one experience written by the actor at resumption
  (review of the reference-augmented history, latest transition = the last reference
  action and its outcome), kept beside that transition;
- ``calibrator``: ``reference`` with the endpoint of the ``calibrator`` role reviewing
  every non-terminal continuation transition (Appendix G.2 interface).

Recovery = terminal success within the budget.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Sequence

import pandas as pd

from hindsight.agent.render import Segment, render_block
from hindsight.agent.views import Entry, Item, ViewResult, causal, current_label, experience, raw

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
    ids = sorted(ok["episode_id"], key=lambda e: hashlib.sha256(f"{seed}:{e}".encode()).hexdigest())[:n]
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


def restore(env: Any, src: Source) -> Any:
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

    def _reference(self, causal_labels: bool) -> Segment:
        k, m = self.src.k, self.src.m
        ref = self.src.reference_entries()
        if causal_labels:
            items = list(causal(ref, start=k + 1, initial=False, action_word="Reference Action").items)
            last_label = f"Outcome of Reference Action {m}" if ref else f"Outcome of Action {k}"
        else:
            items = list(raw(ref, start=k + 1).items)
            last_label = f"Observation {m + 1}"
        if self.resume_experience and items:
            items[-1] = Item(items[-1].index, items[-1].obs_label, items[-1].observation,
                             items[-1].action_label, items[-1].action, self.resume_experience)
        items.append(Item(m + 1, last_label, self.src.reference_outcome()))
        return Segment(items=tuple(items))

    def segments(self, entries: Sequence[Entry], prompts: Any, causal_labels: bool) -> list[Segment]:
        prefix = self.src.prefix_entries()
        if self.condition == "raw":
            view = causal(prefix + list(entries)) if causal_labels else experience(prefix + list(entries))
            return [Segment.of(view)]
        if causal_labels:
            pre = causal(prefix)
            cont: ViewResult | None = causal(entries, start=self.start, initial=False) if entries else None
        else:
            pre = raw(prefix)
            cont = experience(entries, start=self.start) if entries else None
        segs = prompts.reference_segments(Segment.of(pre), self._reference(causal_labels),
                                          Segment.of(cont) if cont else None, self.src.k)
        if self.chat:  # Appendix F.2: the reference block is one separate user message
            segs = [segs[0], Segment(text=render_block(segs[1:4]))] + segs[4:]
        return segs

    def bind(self, prompts: Any) -> "BoundComposer":
        return BoundComposer(self, prompts)


@dataclass
class BoundComposer:
    """A :class:`ContinuationComposer` with its prompt set (the actor loop's Composer)."""

    inner: ContinuationComposer
    prompts: Any

    @property
    def start(self) -> int:
        return self.inner.start

    def actor(self, entries: Sequence[Entry]) -> tuple[list[Segment], str, None]:
        causal_labels = self.inner.condition == "causal_reference"
        segs = self.inner.segments(entries, self.prompts, causal_labels)
        label = current_label("causal" if causal_labels else "raw", self.inner.src.k + len(entries))
        return segs, label, None

    def review(self, entries: Sequence[Entry]) -> list[Segment]:
        plain = [Entry(e.observation, e.action) for e in entries]
        saved = self.inner.resume_experience
        self.inner.resume_experience = None
        try:
            return self.inner.segments(plain, self.prompts, False)
        finally:
            self.inner.resume_experience = saved


CONTINUATION_SCHEMA_FIELDS = (
    ("source_episode_id", "string"), ("source_length", "int64"), ("restored_step", "int64"),
    ("reference_end", "int64"), ("resume_review_call_id", "string"), ("resume_experience", "string"),
)


def continuation_schema() -> Any:
    import pyarrow as pa

    from hindsight.agent.records import EPISODE_SCHEMA

    schema = EPISODE_SCHEMA
    for name, typ in CONTINUATION_SCHEMA_FIELDS:
        schema = schema.append(pa.field(name, getattr(pa, typ)()))
    return schema


async def continuation_cell(
    config: Any, *, model: str, env: str, condition: str, episodes_path: str, steps_path: str,
    n_sources: int, seed: int, settings: Any, prompts_dir: str, in_flight: int, out_episodes: str,
    out_steps: str, out_calls: str, calibrator: str | None = None, min_length: int = 3,
    env_options: Any = None, make_env: Any = None,
) -> pd.DataFrame:
    """Continue every selected source of one (model, env) Raw cell under ``condition``."""
    import asyncio
    import dataclasses

    from hindsight.agent.prompts import HistoryPrompts
    from hindsight.agent.review import review_transition
    from hindsight.agent.runner import EpisodeSpec, Runner, write_episodes
    from hindsight.envs.pool import EnvPool, env_factory
    from hindsight.llm import open_client
    from hindsight.studies.history.design import CONTINUATION_CONDITIONS

    base_cond, sep, fmt = condition.partition("-")
    if base_cond not in CONTINUATION_CONDITIONS or (sep and fmt != "chat"):
        raise ValueError(f"unknown continuation condition {condition!r}; known: {', '.join(CONTINUATION_CONDITIONS)}"
                         " (each optionally followed by '-chat')")
    chat = fmt == "chat"
    if base_cond == "calibrator" and not calibrator:
        raise ValueError("continuation condition 'calibrator' needs an endpoint in roles.calibrator")
    sources = select_sources(pd.read_parquet(episodes_path), pd.read_parquet(steps_path), n_sources, seed, min_length)
    prompts = HistoryPrompts.load(prompts_dir)
    cell = f"history/continuation/{model}/{env}/{condition}"
    base = {"raw": "raw", "causal_reference": "causal_reference"}.get(base_cond, "reference")
    settings = dataclasses.replace(settings, review=base_cond == "calibrator", fmt="chat" if chat else "block",
                                   review_model=calibrator if base_cond == "calibrator" else None)
    async with EnvPool(make_env or env_factory(env, env_options), max(1, min(in_flight, len(sources) or 1))) as pool, \
            open_client(config, cell, out_calls) as client:
        resume: dict[str, tuple[str | None, str | None]] = {}
        if base_cond == "experience":
            async def review(src: Source) -> None:
                comp = ContinuationComposer("reference", src).bind(prompts)
                r = await review_transition(
                    client, prompts, model, env=env, task=src.task, history=comp.review([]),
                    action=src.actions[src.m - 1], observation=src.reference_outcome(),
                    max_tokens=settings.review_max_tokens or settings.max_output_tokens)
                resume[src.episode_id] = (r.call_id, r.experience)
            await asyncio.gather(*(review(s) for s in sources))
        specs = []
        for src in sources:
            call_id, exp = resume.get(src.episode_id, (None, None))
            specs.append(EpisodeSpec(
                env, src.task_id, f"{cell}/{src.task_id}", src.seed, settings,
                composer=ContinuationComposer(base, src, exp, chat).bind(prompts),
                prepare=lambda e, s=src: restore(e, s)))
        client.expect(len(specs) * settings.max_actions * (2 if settings.review else 1))
        episodes = await Runner(client, pool, prompts, in_flight=in_flight).concurrent(specs)
    extra = [{"source_episode_id": s.episode_id, "source_length": s.length, "restored_step": s.k,
              "reference_end": s.m, "resume_review_call_id": resume.get(s.episode_id, (None, None))[0],
              "resume_experience": resume.get(s.episode_id, (None, None))[1]} for s in sources]
    return write_episodes(episodes, {"model": model, "env": env, "condition": condition},
                          {s.task_id: i for i, s in enumerate(sources)}, out_episodes, out_steps,
                          extra=extra, schema=continuation_schema())

