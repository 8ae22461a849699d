"""ACE's playbook in batched mode: Reflector tags, Curator ADDs, near-duplicates merged.

The playbook-curation paper's main system (Section 2, "ACE"; Appendix A "Growth" and
"Feedback"), built on the memory lifecycle (:mod:`memtrials.memory.base`).  A lesson is
``{id, section, text, helpful, harmful, neutral}``; its id is the section's slug and a
5-digit counter shared by all sections (``str-00001``, ``api-00002``, ...), never reused.

After each batch (:meth:`ACEPlaybook.update`):

1. **Reflect.** One ``reflector`` call per episode (concurrently, answers in episode
   order) reads the task, the trajectory, the feedback (``feedback="pass_fail"``: whether
   the task was completed; ``"unit_tests"``: every unit test's result, see
   :func:`.ace_feedback.unit_tests`; ``"reward"``: whether it was completed and the
   environment's final reward, e.g. a purchase reward that gives partial credit) and the lessons the episode was served (its steps'
   ``memory_ids``).  It answers JSON: an ``analysis`` and ``tags: [{id, tag}]``.  A tag
   naming an id that the episode was not served, or repeating an id already tagged in the
   same answer, is ignored and counted.
2. **Tag.** All valid reflections' tags are applied once, after every reflection of the
   batch (batched mode): each tag adds 1 to the lesson's ``helpful``, ``harmful`` or
   ``neutral`` count.
3. **Curate.** One ``curator`` call reads the valid reflections, the playbook with its
   counts, its size in tokens and ``token_budget``; it answers JSON
   ``operations: [{type: ADD, section, content}]``.  New lessons are appended in the
   order of the operations.  A section that is neither a listed slug nor a listed name
   (case and spacing ignored) files the lesson under ``oth`` (counted).  The budget is
   shown to the Curator, not enforced.  A batch without any valid reflection makes no
   Curator call.
4. **Merge.** When lessons were added and an ``embedder`` is set, every lesson's text is
   embedded (``Client.embed``, cached per text), and in playbook order each lesson not
   yet in a group takes every later ungrouped lesson whose cosine with it is at least
   ``threshold`` (0.90, as the paper and ACE's code).  A group keeps its first lesson's
   id, section and **text** (no merging call is made) and sums the three counts; the
   absorbed ids are recorded in the batch's history and never served again.  No other
   step removes a lesson.

A structured-output endpoint decodes narrower schemas (:mod:`.ace_schemas`:
:func:`.reflection_decoding`, :func:`.curation_decoding`: shown ids, listed sections,
lengths that fit the role's cap); answers are judged by the plain ones.  An answer that
fails its schema (``Client.complete_json`` returns it as invalid) changes nothing; its
call id and the reason are appended to ``rejected`` in the state.  The actor is served the
whole playbook without counts (:meth:`ACEPlaybook.frozen`).  The prompts are the
project's own (``config/prompts/memory/ace_*``).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from memtrials.llm.carry import carry, cut_field
from memtrials.memory.ace_feedback import feedback_text, served_ids
from memtrials.memory.ace_schemas import (
    CURATION_SCHEMA, REFLECTION_SCHEMA, TAGS, curation_decoding, reflection_decoding,
)
from memtrials.memory.base import FixedView, Lesson, MemoryBlock
from memtrials.memory.lessons import trajectory_text
from memtrials.memory.retrieval import normalise
from memtrials.config.prompts import PromptFiles

if TYPE_CHECKING:
    from memtrials.llm import Client

PROMPT_FILES = ("ace_reflector_system.txt", "ace_reflector_user.txt", "ace_curator_system.txt",
                "ace_curator_user.txt")
FEEDBACK = ("pass_fail", "unit_tests", "reward")
SECTIONS: dict[str, str] = {  # slug -> section (the AppWorld sections of ACE's code)
    "str": "strategies and hard rules",
    "api": "apis to use",
    "cod": "code snippets and templates",
    "mis": "common mistakes",
    "heu": "problem-solving heuristics",
    "ver": "verification checklist",
    "tro": "troubleshooting and pitfalls",
    "oth": "others",
}
OTHER = "oth"


_PIECE = re.compile(r"\w+|[^\w\s]")


def piece_tokens(text: str) -> int:
    """Word-and-punctuation pieces: the default token count (the same rule as
    ``memtrials.agent.render.approx_tokens``; pass the endpoint's tokenizer instead)."""
    return len(_PIECE.findall(text))


def cosines(vectors: Any) -> np.ndarray:
    """Pairwise cosines of L2-normalised vectors."""
    v = normalise(vectors)
    return v @ v.T


def greedy_groups(sims: Any, threshold: float) -> list[list[int]]:
    """Near-duplicate groups, greedy in order: each item not yet grouped heads a group and
    takes every later ungrouped item whose cosine with it (the head) is >= ``threshold``
    (a 1e-9 slack absorbs rounding of identical vectors).  Every item is in one group."""
    sims = np.asarray(sims, dtype=np.float64)
    taken = np.zeros(len(sims), dtype=bool)
    groups = []
    for i in range(len(sims)):
        if taken[i]:
            continue
        group = [i] + [j for j in range(i + 1, len(sims)) if not taken[j] and sims[i, j] >= threshold - 1e-9]
        taken[group] = True
        groups.append(group)
    return groups


def _size(state: Mapping[str, Any] | int) -> int:
    """Lessons in a state (ACE ``lessons``, a cheatsheet's ``entries``) or a count as given."""
    if isinstance(state, int):
        return state
    return len(state["lessons"] if "lessons" in state else state["entries"])


def grew_by(prev_state: Mapping[str, Any] | int, new_state: Mapping[str, Any] | int) -> float:
    """Relative growth in lessons from one playbook state to a later one (0.25 = 25 %).

    A state is an ACE or cheatsheet state, or a lesson count.  From an empty playbook, any
    lesson is infinite growth and none is 0.
    """
    a, b = _size(prev_state), _size(new_state)
    if a == 0:
        return math.inf if b > 0 else 0.0
    return (b - a) / a


def growth_stops(prev_state: Mapping[str, Any] | int, new_state: Mapping[str, Any] | int,
                 min_growth: float = 0.10) -> bool:
    """The paper's stop rule: a pass that grows the playbook by less than ``min_growth``."""
    return grew_by(prev_state, new_state) < min_growth


def serving_block(lessons: Sequence[Lesson], title: str = "Playbook", grouped: bool = False,
                  sections: Mapping[str, str] = SECTIONS) -> MemoryBlock:
    """The one rendering of an ACE lesson set (the whole playbook in growth, or any subset of it
    in practice, choice, evaluation and the baselines), from lessons in playbook (append) order:
    flat in that order, or, when ``grouped``, by section in ``sections``' order (stable within a
    section) under a ``## <section name>`` header each, so a curated subset keeps its sections."""
    if not grouped or not lessons:
        return MemoryBlock(tuple(Lesson(x.id, x.text) for x in lessons), title)
    rank = {slug: k for k, slug in enumerate(sections)}
    ordered = sorted(lessons, key=lambda x: rank.get(str(x.section), len(rank)))
    parts, last = [title + ":"], None
    for x in ordered:
        if x.section != last:
            parts.append(f"## {sections.get(str(x.section), str(x.section))}")
            last = x.section
        parts.append(f"- {x.text}")
    return MemoryBlock(tuple(Lesson(x.id, x.text) for x in ordered), title, "\n".join(parts) + "\n")


class ACEPlaybook:
    """See module docstring; ``reflector``, ``curator``, ``embedder`` are endpoint names
    (``embedder=None`` turns the merge off)."""

    kind = "ace_playbook"

    def __init__(self, reflector: str, curator: str, embedder: str | None, prompts_dir: Any, *,
                 token_budget: int, feedback: str = "pass_fail", threshold: float = 0.90,
                 sections: Mapping[str, str] = SECTIONS, grouped: bool = False,
                 reflector_max_tokens: int | None = None, curator_max_tokens: int | None = None,
                 obs_chars: int = 400,
                 count_tokens: Callable[[str], int] = piece_tokens,
                 title: str = "Playbook") -> None:
        if feedback not in FEEDBACK:
            raise ValueError(f"ACE feedback must be one of {list(FEEDBACK)}, got {feedback!r}")
        if OTHER not in sections:
            raise ValueError(f"ACE sections must include the fallback slug {OTHER!r}, got {sorted(sections)}")
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"ACE merge threshold must be in (0, 1], got {threshold}")
        self.reflector, self.curator, self.embedder = reflector, curator, embedder
        self.feedback, self.threshold, self.token_budget = feedback, float(threshold), int(token_budget)
        self.sections = dict(sections)
        self.grouped, self.obs_chars, self.title = grouped, obs_chars, title
        self.reflector_max_tokens, self.curator_max_tokens = reflector_max_tokens, curator_max_tokens
        self.count_tokens = count_tokens
        self.prompts = PromptFiles.load(prompts_dir, PROMPT_FILES, what="memory")
        self.lessons: list[dict[str, Any]] = []
        self.counter = 0
        self.batches = 0
        self.rejected: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []

    # -- serving ---------------------------------------------------------------
    def block(self) -> MemoryBlock:
        return serving_block([Lesson(x["id"], x["text"], x["section"]) for x in self.lessons], self.title,
                             self.grouped, self.sections)

    def frozen(self) -> FixedView:
        return FixedView(self.block())

    def playbook(self) -> list[Lesson]:
        """Every lesson in playbook (append) order, with its section and tag counts (the
        playbook study's records; :class:`memtrials.memory.base.PlaybookMemory`)."""
        return [Lesson(x["id"], x["text"], x["section"], {t: x[t] for t in TAGS}) for x in self.lessons]

    def tokens(self) -> int:
        """The playbook's size: the sum of its lessons' token counts."""
        return sum(self.count_tokens(x["text"]) for x in self.lessons)

    def rows(self) -> list[dict[str, Any]]:
        """One row per lesson (playbook order) with its token count, for a playbook artifact."""
        return [{"id": x["id"], "section": x["section"], "text": x["text"], "helpful": x["helpful"],
                 "harmful": x["harmful"], "neutral": x["neutral"], "tokens": self.count_tokens(x["text"])}
                for x in self.lessons]

    # -- prompts ---------------------------------------------------------------
    def _system(self, name: str) -> dict[str, str]:
        return {"role": "system", "content": self.prompts.texts[name].strip()}

    def reflector_messages(self, episode: Any, served: Sequence[str]) -> list[dict[str, str]]:
        by_id = {x["id"]: x for x in self.lessons}
        shown = [f"[{i}] {by_id[i]['text']}" for i in served if i in by_id]
        s = episode.summary
        user = self.prompts.texts["ace_reflector_user.txt"].format(
            task=s["task"], n_steps=len(episode.steps), trajectory=trajectory_text(episode.steps, self.obs_chars),
            feedback=feedback_text(episode, self.feedback), lessons="\n".join(shown) if shown else "(none)")
        return [self._system("ace_reflector_system.txt"), {"role": "user", "content": user.rstrip("\n")}]

    def curator_messages(self, reflections: Sequence[tuple[Any, str]]) -> list[dict[str, str]]:
        playbook = "\n".join(f"[{x['id']}] ({x['section']}) helpful={x['helpful']} harmful={x['harmful']} :: "
                             f"{x['text']}" for x in self.lessons)
        revs = "\n\n".join(f"Attempt {k + 1}. Task: {ep.summary['task']}\n"
                           f"Outcome: {'completed' if ep.summary['won'] else 'not completed'}\n"
                           f"Review: {' '.join(analysis.split())}" for k, (ep, analysis) in enumerate(reflections))
        user = self.prompts.texts["ace_curator_user.txt"].format(
            sections=", ".join(f"{slug} ({name})" for slug, name in self.sections.items()),
            n_lessons=len(self.lessons), tokens=self.tokens(), budget=self.token_budget,
            playbook=playbook or "(empty)", n_reviews=len(reflections), reflections=revs)
        return [self._system("ace_curator_system.txt"), {"role": "user", "content": user.rstrip("\n")}]

    # -- learning --------------------------------------------------------------
    def _section(self, value: str) -> str | None:
        key = " ".join(str(value).lower().split())
        for slug, name in self.sections.items():
            if key in (slug, name.lower()):
                return slug
        return None

    def _reject(self, role: str, r: Any, episode_id: str | None = None) -> None:
        self.rejected.append({"batch": self.batches, "role": role, "call_id": r.call_id,
                              "episode_id": episode_id, "error": r.error})

    async def update(self, client: Client, episodes: Sequence[Any]) -> None:
        batch = {"batch": self.batches, "episodes": [str(ep.summary["episode_id"]) for ep in episodes]}
        served = [served_ids(ep) for ep in episodes]
        replies = await asyncio.gather(*(client.complete_json(
            self.reflector, self.reflector_messages(ep, ids), REFLECTION_SCHEMA, schema_name="reflection",
            max_tokens=self.reflector_max_tokens, purpose="ace_reflector",
            decoding_schema=reflection_decoding(ids, self.reflector_max_tokens)) for ep, ids in zip(episodes, served)))
        counts: dict[str, dict[str, int]] = {}
        reflections, records = [], []
        for ep, ids, r in zip(episodes, served, replies):
            eid = str(ep.summary["episode_id"])
            if not r.valid:
                self._reject("reflector", r, eid)
                records.append({"episode_id": eid, "call_id": r.call_id, "valid": False, "tags": {}, "ignored": []})
                continue
            allowed, seen, ignored = set(ids), set(), []
            applied = {t: 0 for t in TAGS}
            for t in r.value["tags"]:
                if t["id"] not in allowed or t["id"] in seen:
                    ignored.append(t["id"])
                    continue
                seen.add(t["id"])
                counts.setdefault(t["id"], {k: 0 for k in TAGS})[t["tag"]] += 1
                applied[t["tag"]] += 1
            reflections.append((ep, r.value["analysis"]))
            records.append({"episode_id": eid, "call_id": r.call_id, "valid": True, "tags": applied,
                            "ignored": ignored})
        for x in self.lessons:  # tags once, after every reflection of the batch
            for t, n in counts.get(x["id"], {}).items():
                x[t] += n
        batch["reflections"] = records
        batch["curator"] = await self._curate(client, reflections) if reflections else None
        added = batch["curator"]["added"] if batch["curator"] else []
        batch["merges"] = await self._merge(client) if added and self.embedder else []
        self.history.append(batch)
        self.batches += 1

    async def _curate(self, client: Client, reflections: Sequence[tuple[Any, str]]) -> dict[str, Any]:
        r = await client.complete_json(self.curator, self.curator_messages(reflections), CURATION_SCHEMA,
                                       schema_name="curation", max_tokens=self.curator_max_tokens,
                                       purpose="ace_curator",
                                       decoding_schema=curation_decoding(list(self.sections), self.curator_max_tokens))
        if not r.valid:
            self._reject("curator", r)
            return {"call_id": r.call_id, "valid": False, "added": [], "empty": 0, "unknown_sections": []}
        added, empty, unknown = [], 0, []
        for op in r.value["operations"]:
            kept_text = carry(" ".join(op["content"].split()))
            text = kept_text.text
            if not text:
                empty += 1
                continue
            slug = self._section(op["section"])
            if slug is None:
                unknown.append(op["section"])
                slug = OTHER
            self.counter += 1
            lesson = {"id": f"{slug}-{self.counter:05d}", "section": slug, "text": text, "helpful": 0,
                      "harmful": 0, "neutral": 0, "batch": self.batches, "call_id": r.call_id, **cut_field(kept_text)}
            self.lessons.append(lesson)
            added.append(lesson["id"])
        return {"call_id": r.call_id, "valid": True, "added": added, "empty": empty, "unknown_sections": unknown}

    async def _merge(self, client: Client) -> list[dict[str, Any]]:
        assert self.embedder is not None
        result = await client.embed(self.embedder, [x["text"] for x in self.lessons], purpose="ace_dedup")
        sims = cosines(result.vectors)
        kept, merges = [], []
        for group in greedy_groups(sims, self.threshold):
            head = self.lessons[group[0]]
            for j in group[1:]:
                for t in TAGS:
                    head[t] += self.lessons[j][t]
            if len(group) > 1:
                merges.append({"kept": head["id"], "absorbed": [self.lessons[j]["id"] for j in group[1:]],
                               "cosine": [round(float(sims[group[0], j]), 6) for j in group[1:]]})
            kept.append(head)
        self.lessons = kept
        return merges

    # -- state -----------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        return {"reflector": self.reflector, "curator": self.curator, "embedder": self.embedder,
                "feedback": self.feedback, "threshold": self.threshold, "token_budget": self.token_budget,
                "sections": dict(self.sections), "grouped": self.grouped, "obs_chars": self.obs_chars,
                "reflector_max_tokens": self.reflector_max_tokens, "curator_max_tokens": self.curator_max_tokens,
                "tokenizer": getattr(self.count_tokens, "__qualname__", repr(self.count_tokens)),
                "prompts": self.prompts.version()}

    def state(self) -> dict[str, Any]:
        return {"settings": self.settings(), "counter": self.counter, "batches": self.batches,
                "lessons": [dict(x) for x in self.lessons], "rejected": [dict(x) for x in self.rejected],
                "history": json.loads(json.dumps(self.history))}

    def load(self, state: Mapping[str, Any]) -> None:
        """Adopt a state's lessons, counter and records (this memory's settings are kept)."""
        self.lessons = [dict(x) for x in state["lessons"]]
        self.counter, self.batches = int(state["counter"]), int(state["batches"])
        self.rejected = [dict(x) for x in state["rejected"]]
        self.history = json.loads(json.dumps(list(state["history"])))
