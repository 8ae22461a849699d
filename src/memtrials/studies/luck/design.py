"""The luck study's factors (*Lessons from Luck*, sections 3.2-3.3).

Three writing instructions x two decisions x two outcomes = 12 lessons per world and
endpoint; two decisions x two previous-run outcomes x eight memory arms = 32 reader
requests per world and endpoint.
"""

from __future__ import annotations

from typing import Literal

INSTRUCTIONS = ("RB", "RBD", "N")
DECISIONS = ("good", "bad")
OUTCOMES = ("success", "failure")
LESSON_ARMS = ("RB", "RBD", "N")  # matched: the lesson from this outcome
SWAPPED_ARMS = ("RBx", "RBDx", "Nx")  # swapped: the lesson from the other outcome
ARMS = (*LESSON_ARMS, *SWAPPED_ARMS, "NEUTRAL", "PLANTED")

Instruction = Literal["RB", "RBD", "N"]
Decision = Literal["good", "bad"]
Outcome = Literal["success", "failure"]


def other(outcome: str) -> str:
    return "failure" if outcome == "success" else "success"


def arm_lesson(arm: str, outcome: str) -> tuple[str, str] | None:
    """(instruction, lesson outcome) a lesson arm reads in a cell; ``None`` for NEUTRAL/PLANTED."""
    if arm in LESSON_ARMS:
        return arm, outcome
    if arm in SWAPPED_ARMS:
        return arm[:-1], other(outcome)
    if arm in ("NEUTRAL", "PLANTED"):
        return None
    raise ValueError(f"unknown memory arm {arm!r}; expected one of {ARMS}")


def sample_index(instruction: str, decision: str, outcome: str) -> int:
    """Stable sample index 0..11 of a lesson within its world (part of the cache key)."""
    return (INSTRUCTIONS.index(instruction) * 4 + DECISIONS.index(decision) * 2
            + OUTCOMES.index(outcome))


def reader_sample_index(decision: str, outcome: str, arm: str) -> int:
    """Stable sample index 0..31 of a reader request within its world."""
    return (DECISIONS.index(decision) * 16 + OUTCOMES.index(outcome) * 8 + ARMS.index(arm))
