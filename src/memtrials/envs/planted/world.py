"""The planted world's tasks: seeded, a few steps each, the right action readable from the text.

A task is a pure function of its id (``<split>-<type>-<index>``, e.g. ``test-vault-0007``):
SHA-256 of ``planted:<task id>`` seeds a ``random.Random`` that draws the number of steps
(:data:`STEPS`), the number of admissible actions per step (:data:`ACTIONS`), one code per step
and the distractor codes, all distinct within the task (so action strings of different steps
differ, and a repeated string is a repeated action).  At each step the observation names a code; the one admissible
action that mentions that code advances the task (the last one wins it); any other action
leaves the state unchanged and says so, so a failed action can be repeated and its
repetition counted.  Three task types (:data:`TASK_TYPES`), each with its own wording, are the
clusters a selector tells apart.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Sequence

from memtrials.seeds import seed64

STEPS: tuple[int, int] = (3, 5)
"""Steps per task, inclusive range."""
ACTIONS: tuple[int, int] = (3, 5)
"""Admissible actions per step, inclusive range."""
CODE_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"
CODE_DIGITS = "23456789"


@dataclass(frozen=True)
class Wording:
    """How one task type says things: the goal, the cue that names a step's code, the action."""

    goal: str
    cue: str          # "{code}" is the step's code
    action: str       # "{code}" is the code the action mentions


TASK_TYPES: dict[str, Wording] = {
    "vault": Wording("Open the vault: at each step enter the code the panel shows.",
                     "The panel shows code {code}.", "enter code {code}"),
    "relay": Wording("Route the signal: at each step switch to the channel the operator names.",
                     "The operator names channel {code}.", "switch to channel {code}"),
    "depot": Wording("Dispatch the crates: at each step send the crate to the dock on its label.",
                     "The next crate's label reads dock {code}.", "send crate to dock {code}"),
}
CUES = re.compile("|".join(re.escape(w.cue).replace(re.escape("{code}"), r"([A-Z][2-9][A-Z])")
                          for w in TASK_TYPES.values()))
"""Any type's cue sentence; its one filled group is the code it names."""


@dataclass(frozen=True)
class Step:
    """One step: the code the observation names and the admissible actions (shuffled)."""

    code: str
    actions: tuple[str, ...]
    right: str


@dataclass(frozen=True)
class Task:
    task_id: str
    split: str
    type: str
    steps: tuple[Step, ...]

    @property
    def goal(self) -> str:
        return TASK_TYPES[self.type].goal


def task_id(split: str, typ: str, index: int) -> str:
    return f"{split}-{typ}-{index:04d}"


def parse_id(tid: str) -> tuple[str, str, int]:
    """``(split, type, index)`` of a planted task id; a ValueError naming the form otherwise."""
    parts = str(tid).split("-")
    if len(parts) != 3 or parts[1] not in TASK_TYPES or not parts[2].isdigit():
        raise ValueError(f"planted: {tid!r} is not a planted task id (<split>-<type>-<index>, "
                         f"type one of {sorted(TASK_TYPES)})")
    return parts[0], parts[1], int(parts[2])


def _code(rng: random.Random) -> str:
    return rng.choice(CODE_LETTERS) + rng.choice(CODE_DIGITS) + rng.choice(CODE_LETTERS)


def make_task(tid: str) -> Task:
    """The task of id ``tid`` (a pure function of the id)."""
    split, typ, _ = parse_id(tid)
    rng = random.Random(seed64("planted", tid))
    wording = TASK_TYPES[typ]
    steps = []
    used: set[str] = set()  # every code of a task is distinct: no action of one step names another's
    for _ in range(rng.randint(*STEPS)):
        codes: list[str] = []
        n_actions = rng.randint(*ACTIONS)
        while len(codes) < n_actions:
            c = _code(rng)
            if c not in used:
                codes.append(c)
                used.add(c)
        right = wording.action.format(code=codes[0])
        actions = [wording.action.format(code=c) for c in codes]
        rng.shuffle(actions)
        steps.append(Step(codes[0], tuple(actions), right))
    return Task(tid, split, typ, tuple(steps))


def cue(task: Task, k: int) -> str:
    """The sentence of step ``k`` (0-based) that names its code."""
    return TASK_TYPES[task.type].cue.format(code=task.steps[k].code)


def current_code(text: str) -> str | None:
    """The code the last cue of the planted world in ``text`` names (``None`` without one)."""
    found = [next(g for g in m.groups() if g) for m in CUES.finditer(text)]
    return found[-1] if found else None


def right_option(code: str | None, options: Sequence[str]) -> str | None:
    """The one of ``options`` that mentions ``code`` (``None`` when none or several do)."""
    if code is None:
        return None
    hits = [o for o in options if re.search(rf"\b{code}\b", o)]
    return hits[0] if len(hits) == 1 else None


def right_action(observation: str, actions: Sequence[str]) -> str | None:
    """What a capable reader does: the admissible action that mentions the code the last cue
    of ``observation`` names (``None`` when no cue or no single action matches)."""
    return right_option(current_code(observation), actions)
