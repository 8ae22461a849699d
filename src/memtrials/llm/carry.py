"""What of a model's reply is carried forward into later prompts: at most ``carry.max_chars``
characters of each reply-derived text (an action, an experience, a lesson, a reflection, a
playbook bullet, a cheatsheet entry, a guidance), the rest cut with a marker that says how
much.

A reply of unbounded length (a 256 KiB lesson or action) is still stored whole (the call
record, the step row's ``raw_reply`` and ``action``); only what later prompts quote is cut, and
the cut is recorded beside it (the step row's ``carry_cut``, a memory entry's ``cut``).  The cap
is one setting of the run (config/config.yaml, ``carry.max_chars``), set for the process by
:func:`configure` when a cell opens its client (:func:`memtrials.llm.session.open_client`);
a process that never configured it cuts nothing.  A text within the cap is returned as it
is, so prompts (and cache keys) change only where a cut happens.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

_MAX_CHARS: list[int | None] = [None]


@dataclass(frozen=True)
class Carried:
    """``text`` as later prompts receive it; ``cut`` characters of the original left out."""

    text: str
    cut: int = 0


def configure(config: Mapping[str, Any] | None) -> None:
    """Take ``carry.max_chars`` from a (validated) config for this process; None or a config
    without the section leaves the setting as it is."""
    section = (config or {}).get("carry")
    if section is not None:
        set_max_chars(section["max_chars"])


def set_max_chars(value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"carry.max_chars must be an integer >= 1 or null, got {value!r}")
    _MAX_CHARS[0] = value


def max_chars() -> int | None:
    return _MAX_CHARS[0]


def marker(cut: int) -> str:
    """What stands for ``cut`` characters left out."""
    return f" [... {cut} characters cut (carry.max_chars)]"


_MARKED = re.compile(r" \[\.\.\. \d+ characters cut \(carry\.max_chars\)\]\Z")


def carry(text: str, limit: int | None = None) -> Carried:
    """``text`` cut to ``limit`` (default: the configured ``carry.max_chars``) characters plus
    the marker; unchanged when it fits, when no cap is set, or when it was cut before (so a
    text carried twice, e.g. a stored trajectory quoted in a synthesis prompt, is cut once)."""
    limit = max_chars() if limit is None else limit
    if limit is None or len(text) <= limit:
        return Carried(text)
    marked = _MARKED.search(text)
    if marked is not None and marked.start() <= limit:  # cut already (a stored record quoted again)
        return Carried(text)
    cut = len(text) - limit
    return Carried(text[:limit] + marker(cut), cut)


def cut_field(kept: Carried) -> dict[str, int]:
    """``{"cut": n}`` for a memory entry whose text was cut, else nothing (so an entry that was
    not cut, and the memory's snapshot digest, stay as they were)."""
    return {"cut": kept.cut} if kept.cut else {}
