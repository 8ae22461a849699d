"""The label rules of section 6.1 and Appendix D.4, as pure functions.

- a within-actor pair whose parsed executable actions are identical is a tie, with no
  judge call (:func:`needs_judge`);
- otherwise two blind judgements with the A/B order reversed: Win (better with the
  experience) or Loss only when both orders agree, anything else a tie (:func:`outcome`);
- ``q(E) = n_up - n_down`` over the recipient actors; the target is CALIBRATE followed by
  ``E`` if ``q(E) > 0`` or ``n_down = 0``, else NOUPDATE (:func:`target`);
- the content-screening-only ablation (Appendix E.2): CALIBRATE when the candidate passed
  the screen (:func:`screen_only_target`).
"""

from __future__ import annotations

import json
from typing import Sequence

from memtrials.agent.parse import normalize

VERDICTS = ("A", "B", "tie")
OUTCOMES = ("win", "loss", "tie")


def needs_judge(action_without: str, action_with: str) -> bool:
    """False when the two parsed executable actions are the same action (whitespace and case aside)."""
    return normalize(action_without) != normalize(action_with)


def outcome(verdict_ab: str | None, verdict_ba: str | None) -> str:
    """``verdict_ab``: the judge's answer with the experience arm shown as A; ``verdict_ba``:
    the same pair reversed (experience arm as B).  Invalid answers (None) make a tie."""
    with_ab, without_ab = verdict_ab == "A", verdict_ab == "B"
    with_ba, without_ba = verdict_ba == "B", verdict_ba == "A"
    if with_ab and with_ba:
        return "win"
    if without_ab and without_ba:
        return "loss"
    return "tie"


def margin(outcomes: Sequence[str]) -> tuple[int, int, int]:
    """``(n_up, n_down, q)`` over the actors' outcomes."""
    bad = sorted(set(outcomes) - set(OUTCOMES))
    if bad:
        raise ValueError(f"unknown pair outcome(s) {bad}; known: {', '.join(OUTCOMES)}")
    up, down = outcomes.count("win"), outcomes.count("loss")
    return up, down, up - down


def target(outcomes: Sequence[str]) -> str:
    """CALIBRATE if ``q(E) > 0`` or ``n_down(E) = 0``, else NOUPDATE (equation 2)."""
    _, down, q = margin(outcomes)
    return "CALIBRATE" if q > 0 or down == 0 else "NOUPDATE"


def screen_only_target(passed: bool) -> str:
    return "CALIBRATE" if passed else "NOUPDATE"


def target_text(decision: str, experience: str | None) -> str:
    """The training target in the review interface's own output form (Appendix G.2)."""
    if decision == "CALIBRATE":
        if not experience:
            raise ValueError("a CALIBRATE target needs an experience")
        return json.dumps({"decision": "CALIBRATE", "experience": experience}, ensure_ascii=False,
                          separators=(",", ":"))
    if decision == "NOUPDATE":
        return json.dumps({"decision": "NOUPDATE", "experience": None}, separators=(",", ":"))
    raise ValueError(f"unknown target decision {decision!r} (CALIBRATE | NOUPDATE)")
