"""AutoRefine as a memory: a skill library grown by one contrastive call, pruned by utility.

The anti-persistence paper's reimplementation of AutoRefine: skills are kept; after each
batch **one** contrastive ``synthesizer`` call reads the batch's successful and failed
attempts side by side (when the batch has only one side, the latest stored attempt of the
other side stands in; with neither side on hand no call is made) and the library's skill
names, and answers new skills as JSON (``SKILLS_SCHEMA``); the original procedure's two
calls are one here, as in the paper.

An episode is served the ``k`` skills whose text is most similar to its task (cosine of
the ``embedder``'s vectors, ties to the older skill).  A skill's **utility** is the
Laplace-smoothed success rate of the episodes it was served to,
``(successes + 1) / (uses + 2)`` (an unused skill: 0.5; the paper does not give the
formula).  Every ``prune_every`` rounds (2; a round is ``round_size`` episodes, counted
as the stream delivers them), the bottom ``prune_fraction`` (20 %) of the library by
utility is dropped: ``floor(0.2 x n)`` skills, lowest utility first, ties to fewer uses,
then to the older id.  Ids (``sk-00001``, ...) are never reused.

An answer that fails the schema adds nothing and is recorded in ``rejected``.  The call is
attributed to the batch's first episode (``update_calls``).  The prompts are the
project's own (``config/prompts/memory/autorefine_*.md``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa

from memtrials.llm.carry import carry, cut_field
from memtrials.memory.ace_feedback import served_ids
from memtrials.memory.base import Lesson, MemoryBlock, StaticEpisode, TaskContext
from memtrials.memory.lessons import trajectory_text
from memtrials.memory.reflexion import load_prompts, prompt_body
from memtrials.memory.retrieval import top_k

if TYPE_CHECKING:
    from memtrials.llm import Client

PROMPT_FILES = ("autorefine_system.md", "autorefine_user.md")
SKILLS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"skills": {"type": "array", "items": {
        "type": "object", "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
        "required": ["name", "text"], "additionalProperties": False}}},
    "required": ["skills"],
    "additionalProperties": False,
}
TITLE = "Skills from earlier tasks"


def utility(skill: Mapping[str, Any]) -> float:
    """``(successes + 1) / (uses + 2)``."""
    return (int(skill["successes"]) + 1) / (int(skill["uses"]) + 2)


def prune_order(skills: Sequence[Mapping[str, Any]]) -> list[str]:
    """Skill ids from the first to be dropped to the last: utility, then uses, then id."""
    return [x["id"] for x in sorted(skills, key=lambda x: (utility(x), int(x["uses"]), x["id"]))]


class AutoRefineView:
    """Serves the ``k`` skills most similar to the task."""

    step_columns: Sequence[pa.Field] = ()
    episode_columns: Sequence[pa.Field] = (pa.field("retrieval", pa.string()), pa.field("synthesis_calls", pa.int64()))

    def __init__(self, skills: Sequence[Mapping[str, Any]], *, embedder: str, k: int, title: str = TITLE) -> None:
        self.skills = [dict(x) for x in skills]
        self.embedder, self.k, self.title = embedder, k, title

    async def for_episode(self, client: Client, task: TaskContext) -> StaticEpisode:
        if not self.skills or self.k <= 0:
            return StaticEpisode(None, {"retrieval": json.dumps([]), "synthesis_calls": 0})
        keys = await client.embed(self.embedder, [f"{x['name']}: {x['text']}" for x in self.skills],
                                  purpose="autorefine_retrieval")
        query = await client.embed(self.embedder, [task.task], purpose="autorefine_retrieval")
        idx, sims = top_k(query.vectors[0], keys.vectors, self.k)
        lessons = tuple(Lesson(self.skills[i]["id"], f"{self.skills[i]['name']}: {self.skills[i]['text']}")
                        for i in idx)
        info = [{"id": self.skills[i]["id"], "cosine": round(s, 6)} for i, s in zip(idx, sims)]
        return StaticEpisode(MemoryBlock(lessons, self.title), {"retrieval": json.dumps(info), "synthesis_calls": 0})


class AutoRefineMemory:
    """See module docstring; ``synthesizer`` and ``embedder`` are endpoint names."""

    kind = "autorefine"
    calls = {"autorefine_synthesis": ("chat", "update"), "autorefine_retrieval": ("embed", "serve")}
    """The purposes of the memory's own calls (as :attr:`memtrials.memory.expel.ExpeLMemory.calls`)."""

    def __init__(self, *, synthesizer: str, embedder: str, prompts_dir: str | Path, round_size: int, k: int = 5,
                 prune_every: int = 2, prune_fraction: float = 0.2, max_per_side: int = 3,
                 max_tokens: int | None = None, obs_chars: int = 300) -> None:
        if round_size < 1 or prune_every < 1 or max_per_side < 1 or k < 0:
            raise ValueError("autorefine: round_size, prune_every and max_per_side must be >= 1 and k >= 0")
        if not 0.0 <= prune_fraction < 1.0:
            raise ValueError(f"autorefine: prune_fraction must be in [0, 1), got {prune_fraction}")
        self.synthesizer, self.embedder, self.k = synthesizer, embedder, int(k)
        self.round_size, self.prune_every = int(round_size), int(prune_every)
        self.prune_fraction = float(prune_fraction)
        self.max_per_side, self.max_tokens, self.obs_chars = int(max_per_side), max_tokens, int(obs_chars)
        self.prompts = load_prompts(prompts_dir, PROMPT_FILES)
        self.skills: list[dict[str, Any]] = []
        self.last: dict[str, dict[str, Any] | None] = {"success": None, "failure": None}
        self.counter = 0
        self.episodes_seen = 0
        self.batches = 0
        self.rejected: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []
        self.update_calls: dict[str, int] = {}

    def frozen(self) -> AutoRefineView:
        return AutoRefineView(self.skills, embedder=self.embedder, k=self.k)

    # -- learning --------------------------------------------------------------
    def _attempt(self, ep: Any) -> dict[str, Any]:
        s = ep.summary
        return {"episode_id": str(s["episode_id"]), "task": str(s["task"]),
                "trajectory": trajectory_text(ep.steps, self.obs_chars)}

    def messages(self, successes: Sequence[Mapping[str, Any]], failures: Sequence[Mapping[str, Any]]) -> list[dict]:
        def show(xs: Sequence[Mapping[str, Any]]) -> str:
            return "\n\n".join(f"Task: {x['task']}\n{x['trajectory']}" for x in xs) or "(none)"

        skills = "\n".join(f"- {x['name']}" for x in self.skills) or "(none yet)"
        user = prompt_body(self.prompts.texts["autorefine_user.md"]).format(
            skills=skills, successes=show(successes), failures=show(failures))
        return [{"role": "system", "content": prompt_body(self.prompts.texts["autorefine_system.md"])},
                {"role": "user", "content": user}]

    def _credit(self, episodes: Sequence[Any]) -> None:
        by_id = {x["id"]: x for x in self.skills}
        for ep in episodes:
            for sid in served_ids(ep):
                if sid in by_id:
                    by_id[sid]["uses"] += 1
                    by_id[sid]["successes"] += int(bool(ep.summary["won"]))

    def prune(self) -> list[str]:
        """Drop the bottom ``prune_fraction`` of the library by utility; return the dropped ids."""
        n = math.floor(self.prune_fraction * len(self.skills) + 1e-9)
        dropped = prune_order(self.skills)[:n]
        self.skills = [x for x in self.skills if x["id"] not in set(dropped)]
        return dropped

    async def update(self, client: Client, episodes: Sequence[Any]) -> None:
        record: dict[str, Any] = {"batch": self.batches, "call_id": None, "added": [], "pruned": []}
        self._credit(episodes)
        wins = [self._attempt(ep) for ep in episodes if ep.summary["won"]][: self.max_per_side]
        fails = [self._attempt(ep) for ep in episodes if not ep.summary["won"]][: self.max_per_side]
        if not wins and self.last["success"] is not None:
            wins = [self.last["success"]]
        if not fails and self.last["failure"] is not None:
            fails = [self.last["failure"]]
        if episodes and (wins or fails):
            r = await client.complete_json(self.synthesizer, self.messages(wins, fails), SKILLS_SCHEMA,
                                           schema_name="skills", max_tokens=self.max_tokens,
                                           purpose="autorefine_synthesis")
            first = str(episodes[0].summary["episode_id"])
            self.update_calls[first] = self.update_calls.get(first, 0) + 1
            record["call_id"] = r.call_id
            if not r.valid:
                self.rejected.append({"batch": self.batches, "call_id": r.call_id, "episode_id": first,
                                      "error": r.error})
            else:
                for sk in r.value["skills"]:
                    kept_text = carry(" ".join(sk["text"].split()))
                    name, text = carry(" ".join(sk["name"].split())).text, kept_text.text
                    if not text:
                        continue
                    self.counter += 1
                    skill = {"id": f"sk-{self.counter:05d}", "name": name or f"skill {self.counter}", "text": text,
                             "uses": 0, "successes": 0, "batch": self.batches, "call_id": r.call_id,
                             **cut_field(kept_text)}
                    self.skills.append(skill)
                    record["added"].append(skill["id"])
        for ep in episodes:
            self.last["success" if ep.summary["won"] else "failure"] = self._attempt(ep)
        before = self.episodes_seen // (self.round_size * self.prune_every)
        self.episodes_seen += len(episodes)
        if self.episodes_seen // (self.round_size * self.prune_every) > before:
            record["pruned"] = self.prune()
        self.history.append(record)
        self.batches += 1

    # -- state -----------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        return {"synthesizer": self.synthesizer, "embedder": self.embedder, "k": self.k,
                "round_size": self.round_size, "prune_every": self.prune_every,
                "prune_fraction": self.prune_fraction, "max_per_side": self.max_per_side,
                "max_tokens": self.max_tokens, "obs_chars": self.obs_chars, "prompts": self.prompts.version()}

    def state(self) -> dict[str, Any]:
        return {"settings": self.settings(), "counter": self.counter, "batches": self.batches,
                "episodes_seen": self.episodes_seen, "skills": [dict(x) for x in self.skills],
                "last": json.loads(json.dumps(self.last)), "rejected": [dict(x) for x in self.rejected],
                "history": json.loads(json.dumps(self.history)), "update_calls": dict(self.update_calls)}

    def load(self, state: Mapping[str, Any]) -> None:
        """Adopt a state's skills, counters and records (this memory's settings are kept)."""
        self.skills = [dict(x) for x in state["skills"]]
        self.last = json.loads(json.dumps(dict(state["last"])))
        self.counter, self.batches = int(state["counter"]), int(state["batches"])
        self.episodes_seen = int(state["episodes_seen"])
        self.rejected = [dict(x) for x in state["rejected"]]
        self.history = json.loads(json.dumps(list(state["history"])))
        self.update_calls = {str(k): int(v) for k, v in state["update_calls"].items()}
