"""Lesson writers of the luck study (*Lessons from Luck*, section 3.2).

For each world and endpoint, each of the three instructions (RB, RBD, N) writes one
lesson from each of the four scripted previous runs: 12 lessons, sample indices 0..11.
The whole trimmed response is the stored memory.  A refusal (the API's ``refusal``
field, or finish reason ``content_filter``) or an empty response is recorded as *missing*; it is never retried
into a different lesson (the reader cells that need it are not scheduled).
"""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from memtrials.studies.luck.design import DECISIONS, INSTRUCTIONS, OUTCOMES, sample_index
from memtrials.studies.luck.prompts import PromptSet, sha256_text
from memtrials.studies.luck.worlds import World

if TYPE_CHECKING:
    from memtrials.llm import Client

LESSON_SCHEMA = pa.schema([
    ("model", pa.string()), ("world_id", pa.string()), ("instruction", pa.string()),
    ("decision", pa.string()), ("outcome", pa.string()), ("sample", pa.int32()),
    ("status", pa.string()),  # ok | refusal | empty
    ("lesson", pa.string()),  # trimmed response; null when missing
    ("lesson_sha256", pa.string()), ("n_chars", pa.int32()),
    ("names_worse_tool", pa.bool_()), ("finish_reason", pa.string()),
    ("call_id", pa.string()), ("prompt_sha256", pa.string()),
])


def names_tool(text: str, tool: str, coined: str) -> bool:
    """Registered lesson descriptive: the text names the tool (full name or coined part)."""
    return bool(re.search(re.escape(tool), text, re.IGNORECASE)
                or re.search(rf"\b{re.escape(coined)}\b", text, re.IGNORECASE))


def lesson_status(text: str, finish_reason: str, refusal: str = "") -> str:
    """``ok``, or why the lesson is missing (``refusal`` / ``empty``)."""
    if refusal or finish_reason == "content_filter":
        return "refusal"
    if not text.strip():
        return "empty"
    return "ok"


def lesson_row(model: str, w: World, instruction: str, decision: str, outcome: str,
               text: str, finish_reason: str, call_id: str, prompt_sha: str,
               refusal: str = "") -> dict[str, Any]:
    status = lesson_status(text, finish_reason, refusal)
    lesson = text.strip() if status == "ok" else None
    return {
        "model": model, "world_id": w.world_id, "instruction": instruction,
        "decision": decision, "outcome": outcome,
        "sample": sample_index(instruction, decision, outcome), "status": status,
        "lesson": lesson, "lesson_sha256": sha256_text(lesson) if lesson else None,
        "n_chars": len(lesson) if lesson else 0,
        "names_worse_tool": names_tool(lesson, w.worse_tool, w.worse_name) if lesson else False,
        "finish_reason": finish_reason, "call_id": call_id, "prompt_sha256": prompt_sha,
    }


async def write_lessons(client: Client, model: str, worlds: list[World], prompts: PromptSet,
                        max_tokens: int | None = None) -> pd.DataFrame:
    """Run the 12 writer requests of every world concurrently; one row per lesson."""
    # issued grouped by instruction text (then world), so that consecutive requests
    # share the longest prompt prefix (a server's prompt cache reuses it)
    jobs = [(w, instruction, decision, outcome)
            for instruction in INSTRUCTIONS for outcome in OUTCOMES
            for w in worlds for decision in DECISIONS]
    client.expect(len(jobs))

    async def one(w: World, instruction: str, decision: str, outcome: str) -> dict[str, Any]:
        msgs = prompts.writer_messages(w, instruction, decision, outcome)
        r = await client.complete(
            model, msgs, sample=sample_index(instruction, decision, outcome),
            max_tokens=max_tokens, purpose=f"luck/writer/{instruction}",
        )
        prompt_sha = sha256_text("\n\n".join(m["content"] for m in msgs))
        return lesson_row(model, w, instruction, decision, outcome, r.text, r.finish_reason,
                          r.call_id, prompt_sha, r.refusal)

    rows = await asyncio.gather(*(one(*j) for j in jobs))
    return lessons_frame(rows)


def lessons_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    table = pa.Table.from_pylist(rows, schema=LESSON_SCHEMA)
    return table.to_pandas()


def check_lessons(df: pd.DataFrame, source: str) -> None:
    """Fail with a precise message if a lessons table lacks a column."""
    missing = [c for c in LESSON_SCHEMA.names if c not in df.columns]
    if missing:
        raise ValueError(f"{source}: missing columns {missing}; rerun the luck_writers rule for this model")
