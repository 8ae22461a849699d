"""Abstraction memory (rules synthesized from each episode and kept) and joint memory (both stores).

The anti-persistence paper's second and third designs, on the memory lifecycle
(:mod:`memtrials.memory.base`):

- :class:`AbstractionMemory`: after each finished episode one ``synthesizer`` call
  (``Client.complete_json``, ``purpose="abstraction_synthesis"``; the episode's task,
  outcome, actions and observations truncated to ``obs_chars``) answers
  ``{"rules": [...]}`` with at most ``max_rules`` (3) one-sentence rules.  Rules are kept
  in order with ids ``R00001..`` and never removed; a rule whose text (case and spacing
  ignored) is already kept is not added again (counted in the batch's history); an answer
  failing its schema keeps nothing and is listed in ``rejected``.  Each kept rule's text
  is embedded once (``embedder``, ``purpose="memory_index"``).  A later task is served the
  ``k`` (5) rules most similar to its task text (cosine), **not trajectories**.  The calls
  of one batch run concurrently; their rules are added in episode order.
- :class:`JointMemory`: a trajectory store (:class:`~memtrials.memory.trajectory.TrajectoryMemory`)
  and an abstraction store fed by the same episodes; an episode is served the ``k`` most
  similar trajectories and then the ``k`` most similar rules, in one block (lesson ids
  ``T..`` and ``R..``).

Lineage (the evidence for error reproduction): every synthesis with a valid answer adds
an entry to ``lineage`` in the state: the episode it read, ``parents`` (the stored rules
that episode was served, from its ``retrieval`` column: ids ``R..``) and ``generated``
(each non-empty rule it wrote, in order: ``id``, the stored rule's id, the existing one's
for a repeat, and ``admitted``, whether it entered the store as a new rule).  Each stored
rule also keeps its ``parents``.

Synthesis calls happen in :meth:`update`, after the episode; ``update_calls`` in the state
counts them per episode id (one each), so a study can count calls per episode (synthesis
plus execution).  Episode columns: ``retrieval`` (JSON ``[{id, cosine}]``) and
``synthesis_calls`` (0: serving makes no call).  The prompts are the project's own
(``config/prompts/memory/abstraction_*.md``; the paper prints none).

Construction: keyword arguments ``synthesizer``, ``embedder`` (endpoint names),
``prompts_dir`` (default ``config/prompts/memory``), ``k``, ``obs_chars``,
``max_rules``, ``max_tokens`` (the synthesis calls' output cap, ``None``: the endpoint's).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa

from memtrials.config import REPO_ROOT
from memtrials.llm.carry import carry, cut_field
from memtrials.memory.base import Lesson, MemoryBlock, StaticEpisode, TaskContext
from memtrials.memory.lessons import trajectory_text
from memtrials.memory.trajectory import (
    OBS_CHARS, RETRIEVAL_COLUMNS, TrajectoryMemory, TrajectoryView, VectorIndex, nearest, outcome_text,
    prompt_body, trajectories_block, trajectory_record,
)
from memtrials.config.prompts import PromptFiles

if TYPE_CHECKING:
    from memtrials.llm import Client

PROMPTS_DIR = REPO_ROOT / "config" / "prompts" / "memory"
PROMPT_FILES = ("abstraction_system.md", "abstraction_user.md")
TITLE = "Rules from earlier tasks"


def rules_schema(max_rules: int) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "required": ["rules"],
            "properties": {"rules": {"type": "array", "maxItems": int(max_rules), "items": {"type": "string"}}}}


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def served_rules(episode: Any) -> list[str]:
    """The stored rule ids (``R..``) an episode was served, from its ``retrieval`` column."""
    raw = episode.summary.get("retrieval")
    if not raw:
        return []
    return [str(x["id"]) for x in json.loads(raw) if str(x["id"]).startswith("R")]


def rules_block(rules: Sequence[Mapping[str, Any]], title: str = TITLE) -> MemoryBlock:
    return MemoryBlock(tuple(Lesson(r["id"], r["text"]) for r in rules), title)


class AbstractionView:
    """A frozen rule store: serves the ``k`` rules most similar to the task."""

    step_columns: Sequence[pa.Field] = ()
    episode_columns: Sequence[pa.Field] = RETRIEVAL_COLUMNS

    def __init__(self, rules: Sequence[Mapping[str, Any]], index: VectorIndex, k: int, title: str = TITLE) -> None:
        self.rules, self.index, self.k, self.title = list(rules), index, k, title

    def retrieve_with(self, query: Any) -> tuple[list[Mapping[str, Any]], list[dict[str, Any]]]:
        return nearest(self.index, query, self.rules, self.k, text="text")

    async def for_episode(self, client: Client, task: TaskContext) -> StaticEpisode:
        if not self.rules:
            return StaticEpisode(None, {"retrieval": json.dumps([]), "synthesis_calls": 0})
        chosen, info = self.retrieve_with(await self.index.query(client, task.task))
        return StaticEpisode(rules_block(chosen, self.title), {"retrieval": json.dumps(info), "synthesis_calls": 0})


class AbstractionMemory:
    """See module docstring."""

    kind = "abstraction_memory"
    episode_columns = RETRIEVAL_COLUMNS

    def __init__(self, *, synthesizer: str, embedder: str, prompts_dir: str | Path = PROMPTS_DIR, k: int = 5,
                 obs_chars: int = OBS_CHARS, max_rules: int = 3, max_tokens: int | None = None,
                 title: str = TITLE) -> None:
        if int(k) < 1 or int(max_rules) < 1:
            raise ValueError(f"abstraction memory: k and max_rules must be >= 1, got k={k}, max_rules={max_rules}")
        self.synthesizer, self.embedder, self.k, self.obs_chars = synthesizer, embedder, int(k), int(obs_chars)
        self.max_rules, self.max_tokens, self.title = int(max_rules), max_tokens, title
        self.prompts = PromptFiles.load(prompts_dir, PROMPT_FILES, what="memory")
        self.rules: list[dict[str, Any]] = []
        self.index = VectorIndex(embedder)
        self.counter = self.batches = 0
        self.rejected: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []
        self.lineage: list[dict[str, Any]] = []
        self.update_calls: dict[str, int] = {}

    def frozen(self) -> AbstractionView:
        return AbstractionView(self.rules, self.index.copy(), self.k, self.title)

    def messages(self, episode: Any) -> list[dict[str, str]]:
        rec = trajectory_record(episode, "-", self.obs_chars)
        user = prompt_body(self.prompts.texts["abstraction_user.md"]).format(
            task=rec["task"], outcome=outcome_text(rec), trajectory=trajectory_text(rec["steps"], 10 ** 9),
            max_rules=self.max_rules)
        return [{"role": "system", "content": prompt_body(self.prompts.texts["abstraction_system.md"])},
                {"role": "user", "content": user}]

    async def update(self, client: Client, episodes: Sequence[Any]) -> None:
        schema = rules_schema(self.max_rules)
        replies = await asyncio.gather(*(client.complete_json(
            self.synthesizer, self.messages(ep), schema, schema_name="rules", max_tokens=self.max_tokens,
            purpose="abstraction_synthesis") for ep in episodes))
        kept = {_norm(r["text"]): r["id"] for r in self.rules}
        batch: dict[str, Any] = {"batch": self.batches, "added": [], "duplicates": 0, "empty": 0}
        for ep, r in zip(episodes, replies):  # in episode order
            eid = str(ep.summary["episode_id"])
            self.update_calls[eid] = self.update_calls.get(eid, 0) + 1
            if not r.valid:
                self.rejected.append({"batch": self.batches, "episode_id": eid, "call_id": r.call_id,
                                      "error": r.error})
                continue
            parents = served_rules(ep)
            generated: list[dict[str, Any]] = []
            for raw in r.value["rules"][: self.max_rules]:
                kept_text = carry(" ".join(str(raw).split()))
                text = kept_text.text
                if not text:
                    batch["empty"] += 1
                    continue
                if _norm(text) in kept:
                    batch["duplicates"] += 1
                    generated.append({"id": kept[_norm(text)], "admitted": False})
                    continue
                self.counter += 1
                rule = {"id": f"R{self.counter:05d}", "text": text, "episode_id": eid, "call_id": r.call_id,
                        "batch": self.batches, "parents": parents, **cut_field(kept_text)}
                kept[_norm(text)] = rule["id"]
                self.rules.append(rule)
                batch["added"].append(rule["id"])
                generated.append({"id": rule["id"], "admitted": True})
            self.lineage.append({"episode_id": eid, "parents": parents, "generated": generated})
        await self.index.add(client, [r["text"] for r in self.rules if r["id"] in set(batch["added"])])
        self.history.append(batch)
        self.batches += 1

    def settings(self) -> dict[str, Any]:
        return {"synthesizer": self.synthesizer, "embedder": self.embedder, "k": self.k, "obs_chars": self.obs_chars,
                "max_rules": self.max_rules, "max_tokens": self.max_tokens, "prompts": self.prompts.version()}

    def state(self) -> dict[str, Any]:
        return {"settings": self.settings(), "counter": self.counter, "batches": self.batches,
                "rules": [dict(r) for r in self.rules], "vectors": self.index.state(),
                "rejected": [dict(x) for x in self.rejected], "history": json.loads(json.dumps(self.history)),
                "lineage": json.loads(json.dumps(self.lineage)), "update_calls": dict(self.update_calls)}

    def load(self, state: Mapping[str, Any]) -> None:
        """Adopt a state's rules, vectors and records (this memory's settings are kept)."""
        self.rules = [dict(r) for r in state["rules"]]
        self.index.load(state["vectors"])
        self.counter, self.batches = int(state["counter"]), int(state["batches"])
        self.rejected = [dict(x) for x in state["rejected"]]
        self.history = json.loads(json.dumps(list(state["history"])))
        self.lineage = json.loads(json.dumps(list(state["lineage"])))
        self.update_calls = {str(k): int(v) for k, v in state["update_calls"].items()}


class JointView:
    """Both frozen stores: trajectories, then rules, in one block."""

    step_columns: Sequence[pa.Field] = ()
    episode_columns: Sequence[pa.Field] = RETRIEVAL_COLUMNS

    def __init__(self, trajectories: TrajectoryView, rules: AbstractionView) -> None:
        self.trajectories, self.rules = trajectories, rules

    async def for_episode(self, client: Client, task: TaskContext) -> StaticEpisode:
        t, r = self.trajectories, self.rules
        if not t.records and not r.rules:
            return StaticEpisode(None, {"retrieval": json.dumps([]), "synthesis_calls": 0})
        query = await t.index.query(client, task.task)  # one embedder: one query vector for both stores
        trajs, info_t = nearest(t.index, query, t.records, t.k)
        rules, info_r = r.retrieve_with(query)
        a, b = trajectories_block(trajs, t.title), rules_block(rules, r.title)
        text = "\n".join(x.render() for x in (a, b) if x.lessons)
        block = MemoryBlock(a.lessons + b.lessons, t.title, text)
        return StaticEpisode(block, {"retrieval": json.dumps(info_t + info_r), "synthesis_calls": 0})


class JointMemory:
    """A trajectory store and an abstraction store, both fed and both served (module docstring)."""

    kind = "joint_memory"
    episode_columns = RETRIEVAL_COLUMNS

    def __init__(self, *, synthesizer: str, embedder: str, prompts_dir: str | Path = PROMPTS_DIR, k: int = 5,
                 obs_chars: int = OBS_CHARS, max_rules: int = 3, max_tokens: int | None = None) -> None:
        self.trajectories = TrajectoryMemory(embedder=embedder, k=k, obs_chars=obs_chars)
        self.abstraction = AbstractionMemory(synthesizer=synthesizer, embedder=embedder, prompts_dir=prompts_dir,
                                             k=k, obs_chars=obs_chars, max_rules=max_rules, max_tokens=max_tokens)
        # both stores embed with the same endpoint, so one index serves both (texts are keyed by digest)
        self.abstraction.index = self.trajectories.index

    @property
    def update_calls(self) -> dict[str, int]:
        return self.abstraction.update_calls

    def frozen(self) -> JointView:
        return JointView(self.trajectories.frozen(), self.abstraction.frozen())

    async def update(self, client: Client, episodes: Sequence[Any]) -> None:
        await self.trajectories.keep(client, episodes)
        await self.abstraction.update(client, episodes)

    def state(self) -> dict[str, Any]:
        t, a = self.trajectories.state(), self.abstraction.state()
        return {"trajectories": {k: v for k, v in t.items() if k != "vectors"},
                "abstraction": {k: v for k, v in a.items() if k != "vectors"}, "vectors": t["vectors"]}

    def load(self, state: Mapping[str, Any]) -> None:
        self.trajectories.load({**state["trajectories"], "vectors": state["vectors"]})
        self.abstraction.load({**state["abstraction"], "vectors": state["vectors"]})
        self.abstraction.index = self.trajectories.index
