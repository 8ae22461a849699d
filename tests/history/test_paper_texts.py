"""The prompts the paper prints are the paper's text, not only the bytes pinned in SOURCES.md.

Each check compares what the code sends with a copy of the paper's lines
(``data/paper_prompts.txt``, source named there), whitespace-insensitively: the D.1
reminder, the G.2 review prompt and its two valid outputs (D.2), the G.1 labels of Raw,
Causal Transition and Experience, and the D.6 structure of a reference-augmented prompt.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memtrials.agent import views as V
from memtrials.agent.prompts import ActorPrompts, parse_review
from memtrials.agent.render import Segment, render_block
from memtrials.studies.history.continuation import ContinuationComposer, Source

HERE = Path(__file__).resolve().parent
PROMPTS = HERE.parents[1] / "config" / "prompts" / "actor"


def paper() -> dict[str, str]:
    sections: dict[str, list[str]] = {}
    name = None
    for line in (HERE / "data" / "paper_prompts.txt").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            name = line[3:].strip()
            sections[name] = []
        elif name and not line.startswith("#"):
            sections[name].append(line)
    return {k: "\n".join(v).strip() for k, v in sections.items()}


PAPER = paper()


def squash(text: str) -> str:
    """Whitespace-insensitive form; the text copy's typographic quotes as plain ones."""
    return re.sub(r"\s+", "", text.replace("’", "'").replace("‘", "'"))


def no_braces(text: str) -> str:
    """The paper's text copy lost the JSON braces of G.2 / D.2 (SOURCES.md says so)."""
    return text.replace("{", "").replace("}", "")


@pytest.fixture(scope="module")
def prompts() -> ActorPrompts:
    return ActorPrompts.load(PROMPTS)


def test_the_copy_holds_every_section():
    assert set(PAPER) == {"D.1 reminder", "G.2 review prompt", "D.2 outputs", "G.1 Raw", "G.1 Causal Transition",
                          "G.1 Experience", "D.6 structure"}


def test_check_reminder_is_D1(prompts):
    assert squash(prompts.reminder(True)) == squash(PAPER["D.1 reminder"])
    text = prompts.actor_messages(env="alfworld", task="t", history=[Segment.of(V.raw([V.Entry("O1", "A1")]))],
                                  current_observation="O2", current_label="Current observation", step_count=1,
                                  admissible=["a"], mode="choice", reminder=True)[0]["content"]
    assert squash(PAPER["D.1 reminder"]) in squash(text)


def test_review_prompt_is_G2_and_its_outputs_are_D2(prompts):
    system = prompts.review_messages(env="alfworld", task="t", history=[], action="A", observation="O")[0]["content"]
    assert squash(no_braces(system)) == squash(PAPER["G.2 review prompt"])
    noupdate = {"decision": "NOUPDATE", "experience": None}
    calibrate = {"decision": "CALIBRATE", "experience": "..."}
    as_printed = [no_braces(json.dumps(o, separators=(",", ":"))) for o in (noupdate, calibrate)]
    assert squash(" ".join(as_printed)) == squash(PAPER["D.2 outputs"])
    assert parse_review(noupdate) == ("NOUPDATE", None) and parse_review(calibrate) == ("CALIBRATE", "...")


def symbolic(text: str) -> str:
    """Steps 1 and 2 written as the paper's t and t+1 (only where a label numbers a step)."""
    text = re.sub(r"(?<=[A-Za-z] )2(?=\b)", "t+1", text)
    return re.sub(r"(?<=[A-Za-z] )1(?=\b)", "t", text)


@pytest.mark.parametrize("name, view", [("G.1 Raw", "raw"), ("G.1 Causal Transition", "causal"),
                                        ("G.1 Experience", "experience")])
def test_history_labels_are_G1(name, view):
    entries = [V.Entry("Ot", "At", "Et" if view == "experience" else None), V.Entry("Ot+1", "At+1")]
    ours = symbolic(render_block(V.apply_view(view, entries)))
    printed = PAPER[name].split(".", 1)[1]  # drop the "Raw." / "Causal Transition." / "Experience." lead
    assert squash(ours) == squash(printed.replace("E t", "Et"))


def d6_parts() -> list[str]:
    """The fixed lines of the D.6 structure, in order, with its placeholders cut out."""
    placeholders = ["Normal history through L/3", "Reference history from L/3 to 2L/3",
                    "Actual continuation history; None at the first step", "Actual current observation",
                    "Actual current actions"]
    parts = re.split("|".join(re.escape(p) for p in placeholders), PAPER["D.6 structure"])
    # the close line and the continuation line are adjacent (no placeholder between them)
    parts = [q for p in parts for q in re.split(r"(?<=reference history\.)\s+", p)]
    return [p.strip() for p in parts if p.strip()]


def test_reference_prompt_follows_the_D6_structure(prompts):
    src = Source("e", "t", 1, "O1", tuple(f"A{i}" for i in range(1, 10)), tuple(f"A{i}" for i in range(1, 10)),
                 tuple(f"O{i}" for i in range(2, 11)), "task")
    segs, label, _ = ContinuationComposer("reference", src).bind(prompts).actor([])
    text = prompts.actor_messages(env="alfworld", task="task", history=segs, current_observation="O4",
                                  current_label=label, step_count=3, admissible=["a", "b"], mode="choice")[0]["content"]
    fixed = [p.replace("L/3", f"step {src.k}") for p in d6_parts()]
    # ours says "Admissible actions" in every prompt of the study (the house term), the paper's D.6 "Available actions"
    assert fixed[-1] == "Available actions:"
    fixed[-1] = "Admissible actions:"
    assert len(fixed) == 5
    pos = [squash(text).find(squash(p)) for p in fixed]
    assert all(p >= 0 for p in pos) and pos == sorted(pos), (fixed, pos)
    lines = text.split("\n")
    opened, closed = lines.index(fixed[0]), lines.index(fixed[1])
    # normal history through k before the block, the reference records k+1..m inside it,
    # "None" as the continuation at the first step, then the current observation
    assert lines[opened - 3:opened] == [f"[Observation {t}: 'O{t}', Action {t}: 'A{t}']" for t in (1, 2, 3)]
    assert len(lines[opened + 1:closed]) == src.m - src.k + 1
    assert lines[closed + 1] == fixed[2] and lines[closed + 2] == "None"
    assert "Current observation: O4" in lines[closed + 3]
