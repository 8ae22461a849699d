"""Example lessons and the answers they led to (*Lessons from Luck*, Appendix C analogue).

The base rule, fixed before reading: after a chance failure of the better tool (good
decision, failure), the first world in world-id order in which the reader with the matched
lesson named the worse tool while the reader with the irrelevant item named the better
tool.  :func:`appendix_c` applies it as Appendix C does: A at the endpoint with the
largest P2 (RB); B at the luck-carrying endpoint whose RB failure lessons least often name
the worse tool, among its RB lessons that do not name it (full or coined name); C at each
endpoint that carried the chance and for which neither remedy was credited (RBD).
:func:`select_examples` lists the base rule per endpoint and instruction.  Each lesson is
printed as the reader received it; an answer is its ``first_tool`` and ``reason``.  World
ids interleave the domains, so "first in id order" favours none.
"""

from __future__ import annotations

from typing import Any

import pandas as pd


def select_examples(answers: pd.DataFrame, lessons: pd.DataFrame, worlds: pd.DataFrame,
                    instructions: tuple[str, ...] = ("RB", "RBD", "N")) -> list[dict]:
    cell = answers[(answers.decision == "good") & (answers.outcome == "failure")]
    out = []
    for (model, inst), _ in cell[cell.arm.isin(instructions)].groupby(["model", "arm"], sort=True):
        m = cell[cell.model == model]
        les = m[m.arm == inst].set_index("world_id")
        neu = m[m.arm == "NEUTRAL"].set_index("world_id")
        for wid in sorted(set(les.index) & set(neu.index)):
            if les.at[wid, "y"] == 1.0 and neu.at[wid, "y"] == 0.0:
                w = worlds.set_index("world_id").loc[wid]
                text = lessons[(lessons.model == model) & (lessons.world_id == wid) & (lessons.instruction == inst)
                               & (lessons.decision == "good") & (lessons.outcome == "failure")].lesson
                out.append({
                    "model": model, "instruction": inst, "world_id": wid, "domain": w.domain, "cue": w.cue,
                    "better_tool": w.better_tool, "worse_tool": w.worse_tool,
                    "lesson": text.iloc[0] if len(text) else None,
                    "with_lesson": (les.at[wid, "first_tool"], les.at[wid, "reason"]),
                    "with_neutral": (neu.at[wid, "first_tool"], neu.at[wid, "reason"]),
                })
                break
    return out


def _first(answers: pd.DataFrame, lessons: pd.DataFrame, worlds: pd.DataFrame, model: str, inst: str,
           lesson_filter: Any = None) -> dict | None:
    sub_l = lessons[lessons.model == model]
    if lesson_filter is not None:
        keep = sub_l[(sub_l.instruction == inst) & (sub_l.decision == "good") & (sub_l.outcome == "failure")]
        keep = keep[keep.apply(lesson_filter, axis=1)] if len(keep) else keep
        answers = answers[answers.world_id.isin(set(keep.world_id))]
    got = select_examples(answers[answers.model == model], sub_l, worlds, (inst,))
    return got[0] if got else None


def appendix_c(answers: pd.DataFrame, lessons: pd.DataFrame, worlds: pd.DataFrame,
               quantities: pd.DataFrame, readings: pd.DataFrame, remedies: pd.DataFrame,
               descriptives: pd.DataFrame) -> list[dict]:
    """Appendix C's examples A-C by its rules (see the module docstring); each carries its
    ``rule`` (A/B/C) and why the endpoint was chosen, or ``None`` where no endpoint fits."""
    q = quantities[(quantities.quantity == "P2") & (quantities.subset == "all") & (quantities.unit != "panel")]
    out: list[dict] = []
    if len(q) and q.estimate.notna().any():
        top = q.loc[q.estimate.idxmax()]
        ex = _first(answers, lessons, worlds, top.unit, "RB")
        out.append({"rule": "A", "why": f"largest P2 ({top.estimate:+.3f})", "model": top.unit, "example": ex})
    carrying = [r.unit for r in readings.itertuples()
                if r.unit != "panel" and r.contrast == "P2" and r.word == "luck-carrying"]
    d = descriptives[(descriptives.instruction == "RB") & (descriptives.decision == "good")
                     & (descriptives.outcome == "failure") & descriptives.unit.isin(carrying)] \
        if len(descriptives) else descriptives
    if len(d) and d.share_naming_worse.notna().any():
        low = d.loc[d.share_naming_worse.idxmin()]
        ex = _first(answers, lessons, worlds, low.unit, "RB", lambda r: not bool(r.names_worse_tool))
        out.append({"rule": "B", "why": f"luck-carrying, lowest share of RB failure lessons naming the worse tool "
                                        f"({100 * low.share_naming_worse:.0f}%), a lesson that does not name it",
                    "model": low.unit, "example": ex})
    else:
        out.append({"rule": "B", "why": "no luck-carrying endpoint", "model": None, "example": None})
    rem = remedies[(remedies.contrast == "P2")]
    uncredited = [m for m in carrying if not rem[rem.unit == m].credited.any()]
    for m in uncredited:
        out.append({"rule": "C", "why": "luck-carrying, neither remedy credited", "model": m,
                    "example": _first(answers, lessons, worlds, m, "RBD")})
    if not uncredited:
        out.append({"rule": "C", "why": "no luck-carrying endpoint without a credited remedy", "model": None,
                    "example": None})
    return out


def _example_lines(e: dict) -> list[str]:
    return [f"## {e['model']}, {e['instruction']}, world {e['world_id']} ({e['domain']}; cue: {e['cue']})", "",
            f"Better tool `{e['better_tool']}`, worse tool `{e['worse_tool']}`.", "",
            f"Lesson ({e['instruction']}, written from the failure):", "", "```text", str(e["lesson"]), "```", "",
            f"Reader with this lesson: first_tool = `{e['with_lesson'][0]}` (the worse tool). "
            f"Reason: {e['with_lesson'][1] or '(none recorded)'}", "",
            f"Reader with the irrelevant item: first_tool = `{e['with_neutral'][0]}` (the better tool). "
            f"Reason: {e['with_neutral'][1] or '(none recorded)'}", ""]


def appendix_c_markdown(chosen: list[dict]) -> list[str]:
    lines = ["# Appendix C by its rules", "",
             "A: the endpoint with the largest P2 (RB); B: the luck-carrying endpoint whose RB failure",
             "lessons least often name the worse tool, among lessons that do not name it; C: every",
             "luck-carrying endpoint for which neither remedy was credited (RBD).  Each: the first world",
             "in id order meeting the base rule below.", ""]
    for c in chosen:
        head = f"**{c['rule']}** ({c['why']})" + (f": {c['model']}" if c["model"] else "")
        lines += [head, ""]
        lines += _example_lines(c["example"]) if c["example"] else ["No world met the rule.", ""]
    return lines


def examples_markdown(examples: list[dict], chosen: list[dict] | None = None) -> str:
    lines = appendix_c_markdown(chosen) if chosen is not None else []
    lines += ["# Example lessons and answers (Appendix C analogue)", "",
             "Rule: per endpoint and instruction, the first world (id order) where, after a chance failure",
             "of the better tool, the reader with the matched lesson named the worse tool and the reader",
             "with the irrelevant item named the better tool.  Single cases: they do not show how often",
             "lessons take these forms.", ""]
    if not examples:
        lines.append("No world met the rule.")
    for e in examples:
        lines += _example_lines(e)
    return "\n".join(lines) + "\n"
