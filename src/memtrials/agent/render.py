"""Writing a history view as text: one history block, or user/assistant messages.

Block format (the paper's main format, Appendix G.1): one line per entry,
``[Observation t: 'O_t', Action t: 'A_t']``, an experience line
``[Experience derived from Action t -> its returned observation: E_t]`` right after its
source entry, and ``None`` for an empty history.

Chat format (Appendix F): historical observations are user messages and executed actions
assistant messages; a Raw observation is sent as its bare text, other views keep their
label (``Outcome of Action 3: ...``) in the user message; an experience opens the user
message that follows its source action.  Consecutive user messages are merged, so the
roles always alternate.

A history may mix entry items and fixed text lines (the reference block of Appendix
D.6): :class:`Segment` holds either.  Segments marked ``reference`` (the delimited block
of records that were not executed) are, in the chat format, one user message of their
own (Appendix F.2), never merged with the messages around it.

An action or experience is quoted cut to ``carry.max_chars`` characters (a reply of
unbounded length is not fed back whole; :mod:`memtrials.llm.carry`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Sequence

from memtrials.agent.views import Item, ViewResult
from memtrials.llm.carry import carry

_PLAIN_OBS = re.compile(r"^Observation \d+$")
_PIECE = re.compile(r"\w+|[^\w\s]")

Message = dict[str, str]


@dataclass(frozen=True)
class Segment:
    """Part of a rendered history: entry ``items`` or one fixed ``text`` line."""

    items: tuple[Item, ...] = ()
    text: str | None = None
    reference: bool = False           # part of the not-executed reference block (Appendix D.6)

    @classmethod
    def of(cls, view: ViewResult) -> "Segment":
        return cls(items=view.items)


def _carried(text: str | None) -> str | None:
    """A model-written text (an action, an experience) as a prompt quotes it: at most
    ``carry.max_chars`` characters (:mod:`memtrials.llm.carry`; an entry the actor cut already,
    or rebuilt from a stored step row, is cut once)."""
    return text if text is None else carry(text).text


def experience_line(item: Item) -> str:
    """G.1: ``[Experience derived from Action t -> its returned observation: E_t]``."""
    label = item.action_label or f"Action {item.index}"
    return f"[Experience derived from {label} -> its returned observation: {_carried(item.experience)}]"


def item_line(item: Item) -> str:
    """One entry of the history block."""
    if item.action is None:
        return f"[{item.obs_label}: '{item.observation}']"
    return f"[{item.obs_label}: '{item.observation}', {item.action_label}: '{_carried(item.action)}']"


def block_lines(items: Iterable[Item]) -> list[str]:
    lines: list[str] = []
    for item in items:
        lines.append(item_line(item))
        if item.experience:
            lines.append(experience_line(item))
    return lines


def render_block(segments: Sequence[Segment] | ViewResult, empty: str = "None") -> str:
    """The history block: entry lines and fixed lines joined by newlines (``empty`` if none)."""
    if isinstance(segments, ViewResult):
        segments = [Segment.of(segments)]
    lines: list[str] = []
    for seg in segments:
        if seg.text is not None:
            lines.append(seg.text)
        else:
            lines.extend(block_lines(seg.items))
    return "\n".join(lines) if lines else empty


def _user_obs(item: Item) -> str:
    if _PLAIN_OBS.match(item.obs_label):
        return item.observation
    return f"{item.obs_label}: {item.observation}"


def merge_consecutive(messages: Sequence[Message]) -> list[Message]:
    """Merge adjacent messages of the same role (joined by a newline)."""
    out: list[Message] = []
    for m in messages:
        if out and out[-1]["role"] == m["role"]:
            out[-1] = {"role": m["role"], "content": out[-1]["content"] + "\n" + m["content"]}
        else:
            out.append(dict(m))
    return out


def chat_messages(segments: Sequence[Segment] | ViewResult) -> list[tuple[Message, bool]]:
    """The history as chat messages, each with ``sealed``: True for the reference block's
    own user message (consecutive ``reference`` segments, written as a block), which is
    merged with no neighbour; other adjacent messages of one role are merged."""
    if isinstance(segments, ViewResult):
        segments = [Segment.of(segments)]
    parts: list[tuple[Message, bool]] = []
    group: list[Segment] = []

    def flush() -> None:
        if group:
            parts.append(({"role": "user", "content": render_block(group)}, True))
            group.clear()

    for seg in segments:
        if seg.reference:
            group.append(seg)
            continue
        flush()
        if seg.text is not None:
            parts.append(({"role": "user", "content": seg.text}, False))
            continue
        for item in seg.items:
            parts.append(({"role": "user", "content": _user_obs(item)}, False))
            if item.action is not None:
                parts.append(({"role": "assistant", "content": _carried(item.action)}, False))
            if item.experience:
                parts.append(({"role": "user", "content": experience_line(item)}, False))
    flush()
    out: list[tuple[Message, bool]] = []
    for m, sealed in parts:
        if out and not sealed and not out[-1][1] and out[-1][0]["role"] == m["role"]:
            prev = out[-1][0]
            out[-1] = ({"role": m["role"], "content": prev["content"] + "\n" + m["content"]}, False)
        else:
            out.append((dict(m), sealed))
    return out


def render_chat(segments: Sequence[Segment] | ViewResult) -> list[Message]:
    """The history as alternating user (observation) and assistant (action) messages
    (the reference block, if any, its own user message: :func:`chat_messages`)."""
    return [m for m, _ in chat_messages(segments)]


def approx_tokens(text: str) -> int:
    """Length in word-and-punctuation pieces: a tokenizer-free proxy for token counts."""
    return len(_PIECE.findall(text))
