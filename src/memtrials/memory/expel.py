"""ExpeL as a memory: insights kept with strengths (ADD / EDIT / REMOVE / AGREE), plus
successful trajectories retrieved by similarity.

ExpeL (Zhao et al., 2024; LeapLabTHU/ExpeL, read for its rules, never copied), as the
anti-persistence paper uses it as a baseline.  The memory keeps every training episode's
trajectory and a numbered list of at most ``max_rules`` (20) insights, each with a
strength.  After each batch (:meth:`ExpeLMemory.update`), in episode order:

1. **Compare.** Each failed episode whose task has a stored success (this batch's or an
   earlier one; the latest is used) is shown next to it; the batch's successes are shown
   in chunks of ``success_chunk``.  Each comparison is one ``synthesizer`` call that sees
   the current list and answers operations; the calls run one after another, since each
   works on the list the previous one left.
2. **Apply**, in the answer's order (numbers name the list as it was shown):
   ``ADD`` a new insight with strength 2 (ignored and recorded when the list already
   holds ``max_rules``); ``EDIT n`` replaces its text, +1; ``AGREE n`` +1; ``REMOVE n``
   -1, or -3 when the list is full.  A number outside the list is ignored and recorded.
   Insights at strength <= 0 are dropped after the answer is applied.  Ids
   (``ins-00001``, ...) are never reused.

An episode is served the whole insight list (in list order) and the ``k`` stored
**successful** trajectories whose task is most similar to its own (cosine of the
``embedder``'s vectors, ties to the earlier one), in one block.  Where the project departs
from ExpeL: insights are extracted after every batch of the training stream rather than
once after all training; the answer is JSON (``OPERATIONS_SCHEMA``) rather than ExpeL's
text lines, so that small constrained models can answer; an answer that fails the schema
changes nothing and is recorded in ``rejected``.  Each call is attributed to the episode
it was made for (a chunk's call to the chunk's first episode) in ``update_calls``.  The
prompts are the project's own (``config/prompts/memory/expel_*.md``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import pyarrow as pa

from memtrials.llm.carry import carry, cut_field
from memtrials.memory.base import Lesson, MemoryBlock, StaticEpisode, TaskContext
from memtrials.memory.lessons import trajectory_text
from memtrials.memory.reflexion import load_prompts, prompt_body
from memtrials.memory.retrieval import top_k

if TYPE_CHECKING:
    from memtrials.llm import Client

PROMPT_FILES = ("expel_system.md", "expel_user.md")
OPS = ("ADD", "EDIT", "REMOVE", "AGREE")
OPERATIONS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"operations": {"type": "array", "items": {
        "type": "object",
        "properties": {"op": {"type": "string", "enum": list(OPS)}, "number": {"type": "integer"},
                       "text": {"type": "string"}},
        "required": ["op", "number", "text"], "additionalProperties": False}}},
    "required": ["operations"],
    "additionalProperties": False,
}
ADD_STRENGTH = 2


def apply_operations(rules: list[dict[str, Any]], operations: Sequence[Mapping[str, Any]], *, max_rules: int,
                     next_id: Any) -> dict[str, Any]:
    """Apply ExpeL's operations to ``rules`` in place (module docstring, step 2).

    ``next_id()`` gives a new insight's id.  Returns what happened: ids added, edited,
    agreed, removed-from (strength lowered) and dropped, and the ignored operations with why.
    """
    shown = [x["id"] for x in rules]  # numbers refer to the list as shown
    by_id = {x["id"]: x for x in rules}
    done: dict[str, Any] = {"added": [], "edited": [], "agreed": [], "weakened": [], "dropped": [], "ignored": []}
    for op in operations:
        kept_text = carry(" ".join(str(op["text"]).split()))  # carry.max_chars
        kind, text = op["op"], kept_text.text
        if kind == "ADD":
            if len(rules) >= max_rules:
                done["ignored"].append({"op": kind, "number": op["number"], "why": "list full"})
            elif not text:
                done["ignored"].append({"op": kind, "number": op["number"], "why": "empty text"})
            else:
                rule = {"id": next_id(), "text": text, "strength": ADD_STRENGTH, **cut_field(kept_text)}
                rules.append(rule)
                by_id[rule["id"]] = rule
                done["added"].append(rule["id"])
            continue
        n = int(op["number"])
        if not 1 <= n <= len(shown) or by_id[shown[n - 1]] not in rules:
            done["ignored"].append({"op": kind, "number": n, "why": "no such insight"})
            continue
        rule = by_id[shown[n - 1]]
        if kind == "EDIT":
            if not text:
                done["ignored"].append({"op": kind, "number": n, "why": "empty text"})
                continue
            rule["text"] = text
            rule.pop("cut", None)
            rule.update(cut_field(kept_text))
            rule["strength"] += 1
            done["edited"].append(rule["id"])
        elif kind == "AGREE":
            rule["strength"] += 1
            done["agreed"].append(rule["id"])
        else:  # REMOVE
            rule["strength"] -= 3 if len(rules) >= max_rules else 1
            done["weakened"].append(rule["id"])
    for rule in [x for x in rules if x["strength"] <= 0]:
        rules.remove(rule)
        done["dropped"].append(rule["id"])
    return done


class ExpeLView:
    """Serves the insight list and the ``k`` most similar successful trajectories."""

    step_columns: Sequence[pa.Field] = ()
    episode_columns: Sequence[pa.Field] = (pa.field("retrieval", pa.string()), pa.field("synthesis_calls", pa.int64()))

    def __init__(self, rules: Sequence[Mapping[str, Any]], successes: Sequence[Mapping[str, Any]], *,
                 embedder: str, k: int) -> None:
        self.rules = [dict(x) for x in rules]
        self.successes = [dict(x) for x in successes]
        self.embedder, self.k = embedder, k

    async def for_episode(self, client: Client, task: TaskContext) -> StaticEpisode:
        chosen: list[dict[str, Any]] = []
        info: list[dict[str, Any]] = []
        if self.successes and self.k > 0:
            keys = await client.embed(self.embedder, [x["task"] for x in self.successes], purpose="expel_retrieval")
            query = await client.embed(self.embedder, [task.task], purpose="expel_retrieval")
            idx, sims = top_k(query.vectors[0], keys.vectors, self.k)
            chosen = [self.successes[i] for i in idx]
            info = [{"id": self.successes[i]["episode_id"], "cosine": round(s, 6)} for i, s in zip(idx, sims)]
        lessons = [Lesson(x["id"], x["text"]) for x in self.rules]
        lessons += [Lesson(f"traj:{x['episode_id']}", x["task"]) for x in chosen]
        parts = []
        if self.rules:
            parts.append("Insights from earlier tasks:\n" + "\n".join(f"- {x['text']}" for x in self.rules))
        if chosen:
            parts.append("Successful attempts at similar tasks:\n" + "\n\n".join(
                f"Task: {x['task']}\n{x['trajectory']}" for x in chosen))
        block = MemoryBlock(tuple(lessons), "ExpeL", "\n\n".join(parts)) if parts else None
        return StaticEpisode(block, {"retrieval": json.dumps(info), "synthesis_calls": 0})


class ExpeLMemory:
    """See module docstring; ``synthesizer`` and ``embedder`` are endpoint names."""

    kind = "expel"
    calls = {"expel_insights": ("chat", "update"), "expel_retrieval": ("embed", "serve")}
    """The purposes of the memory's own calls: (endpoint task, ``update``: learning from a batch,
    training only; ``serve``: an episode's retrieval, training and evaluation)."""

    def __init__(self, *, synthesizer: str, embedder: str, prompts_dir: str | Path, k: int = 5,
                 max_rules: int = 20, success_chunk: int = 4, max_tokens: int | None = None,
                 obs_chars: int = 300) -> None:
        if max_rules < 1 or success_chunk < 1 or k < 0:
            raise ValueError(f"expel: max_rules and success_chunk must be >= 1 and k >= 0, got "
                             f"{max_rules}, {success_chunk}, {k}")
        self.synthesizer, self.embedder, self.k = synthesizer, embedder, int(k)
        self.max_rules, self.success_chunk = int(max_rules), int(success_chunk)
        self.max_tokens, self.obs_chars = max_tokens, int(obs_chars)
        self.prompts = load_prompts(prompts_dir, PROMPT_FILES)
        self.rules: list[dict[str, Any]] = []
        self.trajectories: list[dict[str, Any]] = []
        self.counter = 0
        self.batches = 0
        self.rejected: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []
        self.update_calls: dict[str, int] = {}

    def frozen(self) -> ExpeLView:
        return ExpeLView(self.rules, [x for x in self.trajectories if x["won"]], embedder=self.embedder, k=self.k)

    # -- learning --------------------------------------------------------------
    def _trajectory(self, ep: Any) -> dict[str, Any]:
        s = ep.summary
        return {"episode_id": str(s["episode_id"]), "task_id": str(s["task_id"]), "task": str(s["task"]),
                "won": bool(s["won"]), "trajectory": trajectory_text(ep.steps, self.obs_chars), "batch": self.batches}

    def messages(self, experience: str) -> list[dict[str, str]]:
        rules = "\n".join(f"{n}. {x['text']}" for n, x in enumerate(self.rules, 1)) or "(none yet)"
        user = prompt_body(self.prompts.texts["expel_user.md"]).format(
            rules=rules, n_rules=len(self.rules), max_rules=self.max_rules, experience=experience)
        return [{"role": "system", "content": prompt_body(self.prompts.texts["expel_system.md"])},
                {"role": "user", "content": user}]

    def comparisons(self, batch: Sequence[dict[str, Any]]) -> list[tuple[str, str, list[str]]]:
        """(kind, experience text, episode ids) of the batch's calls, in episode order."""
        out: list[tuple[str, str, list[str]]] = []
        for t in batch:
            if t["won"]:
                continue
            wins = [x for x in self.trajectories if x["won"] and x["task_id"] == t["task_id"]]
            if wins:
                w = wins[-1]
                out.append(("pair", f"Task: {t['task']}\n\nFailed attempt:\n{t['trajectory']}\n\n"
                                    f"Successful attempt:\n{w['trajectory']}", [t["episode_id"], w["episode_id"]]))
        wins = [t for t in batch if t["won"]]
        for i in range(0, len(wins), self.success_chunk):
            chunk = wins[i:i + self.success_chunk]
            out.append(("successes", "\n\n".join(f"Successful attempt. Task: {t['task']}\n{t['trajectory']}"
                                                 for t in chunk), [t["episode_id"] for t in chunk]))
        return out

    def _next_id(self) -> str:
        self.counter += 1
        return f"ins-{self.counter:05d}"

    async def update(self, client: Client, episodes: Sequence[Any]) -> None:
        batch = [self._trajectory(ep) for ep in episodes]
        self.trajectories.extend(batch)
        record: dict[str, Any] = {"batch": self.batches, "calls": []}
        for kind, experience, ids in self.comparisons(batch):
            r = await client.complete_json(self.synthesizer, self.messages(experience), OPERATIONS_SCHEMA,
                                           schema_name="insight_operations", max_tokens=self.max_tokens,
                                           purpose="expel_insights")
            self.update_calls[ids[0]] = self.update_calls.get(ids[0], 0) + 1
            if not r.valid:
                self.rejected.append({"batch": self.batches, "call_id": r.call_id, "episode_id": ids[0],
                                      "error": r.error})
                record["calls"].append({"kind": kind, "episodes": ids, "call_id": r.call_id, "valid": False})
                continue
            done = apply_operations(self.rules, r.value["operations"], max_rules=self.max_rules,
                                    next_id=self._next_id)
            record["calls"].append({"kind": kind, "episodes": ids, "call_id": r.call_id, "valid": True, **done})
        self.history.append(record)
        self.batches += 1

    # -- state -----------------------------------------------------------------
    def settings(self) -> dict[str, Any]:
        return {"synthesizer": self.synthesizer, "embedder": self.embedder, "k": self.k, "max_rules": self.max_rules,
                "success_chunk": self.success_chunk, "max_tokens": self.max_tokens, "obs_chars": self.obs_chars,
                "prompts": self.prompts.version()}

    def state(self) -> dict[str, Any]:
        return {"settings": self.settings(), "counter": self.counter, "batches": self.batches,
                "rules": [dict(x) for x in self.rules], "trajectories": [dict(x) for x in self.trajectories],
                "rejected": [dict(x) for x in self.rejected], "history": json.loads(json.dumps(self.history)),
                "update_calls": dict(self.update_calls)}

    def load(self, state: Mapping[str, Any]) -> None:
        """Adopt a state's insights, trajectories and records (this memory's settings are kept)."""
        self.rules = [dict(x) for x in state["rules"]]
        self.trajectories = [dict(x) for x in state["trajectories"]]
        self.counter, self.batches = int(state["counter"]), int(state["batches"])
        self.rejected = [dict(x) for x in state["rejected"]]
        self.history = json.loads(json.dumps(list(state["history"])))
        self.update_calls = {str(k): int(v) for k, v in state["update_calls"].items()}
