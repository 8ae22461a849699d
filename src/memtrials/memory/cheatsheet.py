"""Dynamic Cheatsheet, cumulative mode, after each batch: one call rewrites the whole cheatsheet.

The playbook-curation paper's second system (Section 2; Appendix A.2).  Dynamic
Cheatsheet's own loop curates after every question; the paper runs it after each batch
of training tasks, and so does :meth:`Cheatsheet.update`: one ``curator`` call reads the
current cheatsheet and the batch's trajectories (the task, every action and what it
returned; never the reward, the score or how the episode ended), judges by itself which
attempts succeeded, and writes a whole new cheatsheet between ``<cheatsheet>`` and
``</cheatsheet>``, each entry as ``<entry uses="N">text</entry>`` (``N``: the entry's
successful uses, counted by the model itself).

Parsing.  The reply's last complete cheatsheet block is read; text in it outside the
entries is ignored, an entry without ``uses`` counts 0 uses.  A reply with no complete
block (e.g. cut at the token cap), or whose block holds no non-empty entry, does not
parse: the old cheatsheet is kept and the call id with the reason is appended to
``rejected`` in the state.  (An entry-less block is refused rather than taken as an
empty cheatsheet, so that one formatting slip cannot erase the playbook.)

Ids.  An entry of the new cheatsheet whose text (whitespace-normalised) equals an entry
of the old one keeps that entry's id, matched one to one in order; a changed uses count
alone keeps the id.  Every other entry gets a new id ``dc-NNNNN`` from a counter that
never goes back.  Entries are served in the cheatsheet's order, as lessons, with or
without their counts (``show_uses``).  The prompts are the project's own
(``config/prompts/memory/dc_*``).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from memtrials.llm.carry import carry, cut_field
from memtrials.memory.base import FixedView, Lesson, MemoryBlock
from memtrials.memory.lessons import trajectory_text
from memtrials.config.prompts import PromptFiles

if TYPE_CHECKING:
    from memtrials.llm import Client

PROMPT_FILES = ("dc_curator_system.txt", "dc_curator_user.txt")

_BLOCK = re.compile(r"<cheatsheet>(.*?)</cheatsheet>", re.DOTALL | re.IGNORECASE)
_ENTRY = re.compile(r"<entry(?:\s+uses\s*=\s*[\"']?(\d+)[\"']?)?\s*>(.*?)</entry>", re.DOTALL | re.IGNORECASE)


def norm(text: str) -> str:
    """An entry's text with runs of whitespace made one space (what identity compares)."""
    return " ".join(text.split())


def parse_cheatsheet(reply: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """``(entries, None)`` with ``{text, uses}`` per entry (and ``cut``: characters beyond
    ``carry.max_chars`` left out, where any were), or ``(None, reason)``."""
    blocks = _BLOCK.findall(reply)
    if not blocks:
        return None, "no complete <cheatsheet>...</cheatsheet> block in the reply"
    kept = [(carry(norm(text)), uses) for uses, text in _ENTRY.findall(blocks[-1])]  # carry.max_chars each
    entries = [{"text": k.text, "uses": int(uses) if uses else 0, **cut_field(k)} for k, uses in kept]
    entries = [e for e in entries if e["text"]]
    if not entries:
        return None, "the cheatsheet block holds no non-empty <entry>"
    return entries, None


def render_entries(entries: Sequence[Mapping[str, Any]]) -> str:
    """The cheatsheet as the curator reads and writes it."""
    if not entries:
        return "<cheatsheet>\n</cheatsheet>"
    return "<cheatsheet>\n" + "\n".join(f"<entry uses=\"{e['uses']}\">{e['text']}</entry>" for e in entries) \
        + "\n</cheatsheet>"


class Cheatsheet:
    """See module docstring; ``curator`` is an endpoint name of the registry."""

    kind = "dynamic_cheatsheet"

    def __init__(self, curator: str, prompts_dir: Any, *, max_tokens: int | None = None, obs_chars: int = 400,
                 show_uses: bool = False, title: str = "Cheatsheet") -> None:
        self.curator, self.max_tokens, self.obs_chars = curator, max_tokens, obs_chars
        self.show_uses, self.title = show_uses, title
        self.prompts = PromptFiles.load(prompts_dir, PROMPT_FILES, what="memory")
        self.entries: list[dict[str, Any]] = []
        self.counter = 0
        self.batches = 0
        self.rejected: list[dict[str, Any]] = []
        self.history: list[dict[str, Any]] = []

    # -- serving ---------------------------------------------------------------
    def block(self) -> MemoryBlock:
        def text(e: Mapping[str, Any]) -> str:
            return f"{e['text']} (uses: {e['uses']})" if self.show_uses else e["text"]
        return MemoryBlock(tuple(Lesson(e["id"], text(e)) for e in self.entries), self.title)

    def frozen(self) -> FixedView:
        return FixedView(self.block())

    def playbook(self) -> list[Lesson]:
        """The entries in cheatsheet order, without their counts in the text, in one section
        ``cheatsheet``, each with its ``uses`` (:class:`memtrials.memory.base.PlaybookMemory`)."""
        return [Lesson(e["id"], e["text"], "cheatsheet", {"uses": e["uses"]}) for e in self.entries]

    # -- learning --------------------------------------------------------------
    def messages(self, episodes: Sequence[Any]) -> list[dict[str, str]]:
        attempts = "\n\n".join(
            f"Attempt {k + 1}. Task: {ep.summary['task']}\n{trajectory_text(ep.steps, self.obs_chars)}"
            for k, ep in enumerate(episodes))
        user = self.prompts.texts["dc_curator_user.txt"].format(
            cheatsheet=render_entries(self.entries), n_attempts=len(episodes), attempts=attempts)
        return [{"role": "system", "content": self.prompts.texts["dc_curator_system.txt"].strip()},
                {"role": "user", "content": user.rstrip("\n")}]

    def rewrite(self, entries: Sequence[Mapping[str, Any]], call_id: str) -> dict[str, list[str]]:
        """Replace the cheatsheet by ``entries`` (``{text, uses}``), ids by the module's rule."""
        old = list(self.entries)
        free = list(range(len(old)))
        new, kept, fresh = [], [], []
        for e in entries:
            match = next((k for k in free if old[k]["text"] == e["text"]), None)
            if match is not None:
                free.remove(match)
                eid = old[match]["id"]
                kept.append(eid)
                since, first_call = old[match]["batch"], old[match]["call_id"]
            else:
                self.counter += 1
                eid = f"dc-{self.counter:05d}"
                fresh.append(eid)
                since, first_call = self.batches, call_id
            new.append({"id": eid, "text": e["text"], "uses": int(e["uses"]), "batch": since, "call_id": first_call,
                        **({"cut": int(e["cut"])} if e.get("cut") else {})})
        self.entries = new
        return {"kept": kept, "new": fresh, "dropped": [old[k]["id"] for k in free]}

    async def update(self, client: Client, episodes: Sequence[Any]) -> None:
        r = await client.complete(self.curator, self.messages(episodes), max_tokens=self.max_tokens,
                                  purpose="dc_curator")
        record: dict[str, Any] = {"batch": self.batches, "call_id": r.call_id,
                                  "episodes": [str(ep.summary["episode_id"]) for ep in episodes]}
        entries, error = parse_cheatsheet(r.text)
        if entries is None:
            self.rejected.append({"batch": self.batches, "call_id": r.call_id, "error": error,
                                  "finish_reason": r.finish_reason})
            record.update(accepted=False, kept=[], new=[], dropped=[])
        else:
            record.update(accepted=True, **self.rewrite(entries, r.call_id))
        self.history.append(record)
        self.batches += 1

    # -- state -----------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        settings = {"curator": self.curator, "show_uses": self.show_uses, "max_tokens": self.max_tokens,
                    "obs_chars": self.obs_chars, "prompts": self.prompts.version()}
        return {"settings": settings,
                "counter": self.counter, "batches": self.batches, "entries": [dict(e) for e in self.entries],
                "rejected": [dict(x) for x in self.rejected], "history": json.loads(json.dumps(self.history))}

    def load(self, state: Mapping[str, Any]) -> None:
        """Adopt a state's entries, counter and records (this memory's settings are kept)."""
        self.entries = [dict(e) for e in state["entries"]]
        self.counter, self.batches = int(state["counter"]), int(state["batches"])
        self.rejected = [dict(x) for x in state["rejected"]]
        self.history = json.loads(json.dumps(list(state["history"])))
