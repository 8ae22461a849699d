"""Parsing the actor's reply into an executable action.

Issue 5 / Appendix A: an unparsable or inadmissible action is recorded and still counts as
a step; it is sent to the environment as written, which treats it as it treats any
invalid command ("Nothing happens.", an error message).

- ``choice`` mode (replies constrained to the admissible list): the reply, stripped.
- an admissible entry may be a *template*, ``name[<what to write>]`` (WebShop's search bar:
  ``search[<your query>]``): any ``name[text]`` (the same name, non-empty text on one line) is admissible
  through it (:func:`templates`, :func:`fills_template`); in ``choice`` mode the grammar lets
  the reply write the text (:func:`memtrials.llm.structured.gbnf_actions`).
- ``react`` mode: the text of the last ``<action> ... </action>``; without one, a reply
  of one line is taken as the action, anything else is *unparsable* and its first line
  (at most 200 characters) is what the environment receives.
- the joint actor (section 6.4 / Appendix G.3, :func:`parse_joint`): one
  ``<calibration>{...}</calibration>`` block, then the action, parsed as in ``react`` mode
  with the block taken out; a malformed block is INVALID, the action is parsed regardless.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Sequence

from memtrials.agent.prompts import TEMPLATE, parse_review  # noqa: F401  (TEMPLATE: re-exported)

_ACTION = re.compile(r"<action>\s*(.*?)\s*</action>", re.DOTALL | re.IGNORECASE)
_THINK = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^```[a-zA-Z]*\s*\n(.*?)\n?```$", re.DOTALL)
MAX_FALLBACK = 200
_PLACEHOLDER = re.compile(r"^<[^<>]*>$")
_CALL = re.compile(r"^([A-Za-z_][A-Za-z0-9_ ]*)\[([^\n]*\S[^\n]*)\]$")


def templates(admissible: Sequence[str] | None) -> list[str]:
    """The names of the template entries of ``admissible`` (``search`` for ``search[<your query>]``)."""
    return [m.group(1) for m in (TEMPLATE.match(a) for a in admissible or ()) if m]


def fills_template(action: str, names: Sequence[str]) -> bool:
    """Whether ``action`` is ``name[text]`` for one of the template ``names``: the name exactly
    as the template writes it (WebShop refuses ``Search[x]`` and ``search [x]``), the text
    non-empty, on one line and not a placeholder (``<keywords>`` copied is not filled in)."""
    m = _CALL.match(action.strip())
    return bool(m) and m.group(1) in set(names) and not _PLACEHOLDER.match(m.group(2).strip())


@dataclass(frozen=True)
class Parsed:
    """``action`` is what is executed; ``status`` is ok, inadmissible or unparsable."""

    action: str
    status: str


def normalize(action: str) -> str:
    """Whitespace-normalized, lower-case form used to compare actions."""
    return " ".join(action.split()).lower()


def parse_action(reply: str, admissible: Sequence[str] | None, mode: str = "react") -> Parsed:
    """The action in ``reply`` and whether it is admissible (``None``: no list to check)."""
    text = reply or ""
    action: str | None
    if mode == "choice":
        action = text.strip()
    else:
        found = _ACTION.findall(text)
        if found:
            action = found[-1].strip()
            fenced = _FENCE.match(action)  # code actions (AppWorld) often come fenced
            if fenced:
                action = fenced.group(1).strip()
        else:
            rest = _THINK.sub("", text).strip()
            action = rest if rest and "\n" not in rest and len(rest) <= MAX_FALLBACK else None
    if not action:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        return Parsed(first[:MAX_FALLBACK], "unparsable")
    if admissible is not None:
        lookup = {normalize(a): a for a in admissible}
        canon = lookup.get(normalize(action))
        if canon is not None and TEMPLATE.match(canon):  # the placeholder copied, not filled in
            return Parsed(action, "inadmissible")
        if canon is None:
            return Parsed(action, "ok" if fills_template(action, templates(admissible)) else "inadmissible")
        return Parsed(canon, "ok")
    return Parsed(action, "ok")


# -- the joint actor's reply (section 6.4 / Appendix G.3) ------------------------------------
_CALIBRATION = re.compile(r"<calibration>(.*?)</calibration>", re.DOTALL | re.IGNORECASE)
_CALIBRATION_TAG = re.compile(r"</?calibration>", re.IGNORECASE)


@dataclass(frozen=True)
class Calibration:
    """The calibration block of a joint reply: ``decision`` CALIBRATE | NOUPDATE | INVALID,
    ``experience`` (CALIBRATE only) and ``status``: ok, or why the block is invalid
    (missing, multiple, after_action, not_json, not_an_output)."""

    decision: str
    experience: str | None
    status: str


def parse_calibration(reply: str) -> Calibration:
    """The one ``<calibration>{...}</calibration>`` block before the action (outside ``<think>``).

    Valid only when there is exactly one block, it comes before the ``<action>`` tag (if
    any), and it holds one of the two outputs of the review (Appendix G.2:
    ``{"decision":"NOUPDATE","experience":null}`` or CALIBRATE with a non-empty
    experience); anything else is INVALID (the history is left unchanged)."""
    text = _THINK.sub("", reply or "")
    found = list(_CALIBRATION.finditer(text))
    if not found:
        return Calibration("INVALID", None, "missing")
    if len(found) > 1:
        return Calibration("INVALID", None, "multiple")
    act = _ACTION.search(text)
    if act is not None and act.start() < found[0].start():
        return Calibration("INVALID", None, "after_action")
    try:
        value = json.loads(found[0].group(1).strip())
    except ValueError:
        return Calibration("INVALID", None, "not_json")
    decision, exp = parse_review(value if isinstance(value, dict) else None)
    return Calibration(decision, exp, "ok" if decision != "INVALID" else "not_an_output")


def parse_joint(reply: str, admissible: Sequence[str] | None, mode: str = "react") -> tuple[Calibration, Parsed]:
    """A joint reply: its calibration block (:func:`parse_calibration`) and its action,
    parsed as any reply (:func:`parse_action`) with the calibration block(s) taken out."""
    text = _THINK.sub("", reply or "")
    rest = _CALIBRATION_TAG.sub("", _CALIBRATION.sub("", text)).strip()
    return parse_calibration(reply), parse_action(rest, admissible, mode)
