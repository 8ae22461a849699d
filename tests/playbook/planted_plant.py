"""A planted lesson bank for the tests (the same shape as the config's; its own values, so the
tests do not move when the default's bank is retuned)."""

from __future__ import annotations

from memtrials.studies.playbook.planted import Plant

LESSONS = {
    "H1": (0.12, "Read the goal sentence again before each action (tip H1)."),
    "H2": (0.09, "Prefer the action that names the object in the goal (tip H2)."),
    "H3": (0.06, "Check the last observation before you act again (tip H3)."),
    "X1": (-0.15, "Always repeat the action that worked in another task (tip X1)."),
    "N1": (0.0, "Keep your notes short and in plain words (tip N1)."),
    "N2": (0.0, "Say the room you are in when you start (tip N2)."),
    "H4": (0.04, "Skip actions that change nothing you can see (tip H4)."),
    "X2": (-0.06, "Act before you read the whole observation (tip X2)."),
    "N3": (0.0, "Count the steps you have taken so far (tip N3)."),
    "N4": (0.0, "Use the same verb the task uses when you can (tip N4)."),
}
FIRST = ("H1", "H2", "H3", "X1")


def plant(interaction: tuple[str, str, float] | None = ("H3", "N1", 0.06), base: float = 0.35,
          per_call: int = 2) -> Plant:
    return Plant.of({"base": base, "per_call": per_call, "first": list(FIRST),
                     "interaction": None if interaction is None else list(interaction),
                     "lessons": {c: {"effect": e, "text": t} for c, (e, t) in LESSONS.items()}})
