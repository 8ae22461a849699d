"""Reader requests of the luck study (*Lessons from Luck*, section 3.3, Appendix B).

Per world and endpoint: two decisions x two previous-run outcomes x eight memory arms
= 32 requests (sample indices 0..31).  A cell whose lesson is missing is *not
scheduled*; it is kept as a row with status ``not_scheduled`` so that the missing-data
bounds see it.  Answers are counted by ``first_tool``; an answer that is not valid is
recovered only by the registered rule (section 4, "Outcome"): the ``first_tool`` values
in its raw text name exactly one of the two tools.  Every invalid answer keeps its raw text.
"""

from __future__ import annotations

import asyncio
import math
import re
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa

from memtrials.studies.luck.design import ARMS, DECISIONS, OUTCOMES, arm_lesson, reader_sample_index
from memtrials.studies.luck.prompts import PromptSet, answer_schema, sha256_text
from memtrials.studies.luck.worlds import World

if TYPE_CHECKING:
    from memtrials.llm import Client

ANSWER_SCHEMA = pa.schema([
    ("model", pa.string()), ("world_id", pa.string()), ("domain", pa.string()),
    ("cue", pa.string()), ("decision", pa.string()), ("outcome", pa.string()),
    ("arm", pa.string()), ("sample", pa.int32()),
    ("status", pa.string()),  # valid | recovered | invalid | not_scheduled
    ("first_tool", pa.string()), ("reason", pa.string()),
    ("y", pa.float64()),  # 1 worse tool, 0 better tool, NaN not counted
    ("memory_sha256", pa.string()), ("raw", pa.string()), ("error", pa.string()),
    ("finish_reason", pa.string()), ("structured", pa.bool_()), ("call_id", pa.string()),
])

# a first_tool value: quoted (possibly cut off by the token cap) or bare up to , } or a line end
_FIRST_TOOL = re.compile(r'"?first_tool"?\s*[:=]\s*(?:"([^"\n]*)"?|([^,}\n"]*))')
_TOKEN = re.compile(r"[A-Za-z0-9_.\-]+")


def recover_first_tool(raw: str, tools: tuple[str, str]) -> str | None:
    """The registered recovery rule (section 4, "Outcome"): the ``first_tool`` values in
    the raw text name exactly one of the two tools (values that name neither, such as
    "none" or a third name, do not block it; values naming both tools, in one value or
    across values, do); else ``None``."""
    named: set[str] = set()
    for quoted, bare in _FIRST_TOOL.findall(raw or ""):
        named.update(t for t in _TOKEN.findall(quoted or bare) if t in tools)
    return named.pop() if len(named) == 1 else None


def score(first_tool: str | None, w: World) -> float:
    if first_tool == w.worse_tool:
        return 1.0
    if first_tool == w.better_tool:
        return 0.0
    return math.nan


def memory_for(arm: str, w: World, decision: str, outcome: str, prompts: PromptSet,
               lessons: dict[tuple[str, str, str, str], str | None]) -> str | None:
    """The memory item a reader cell shows (``None``: its lesson is missing)."""
    if arm == "NEUTRAL":
        return prompts.neutral_memory(w)
    if arm == "PLANTED":
        return prompts.planted_memory(w)
    src = arm_lesson(arm, outcome)
    assert src is not None
    return lessons.get((w.world_id, src[0], decision, src[1]))


def answer_row(model: str, w: World, decision: str, outcome: str, arm: str, memory: str | None,
               result: Any | None) -> dict[str, Any]:
    row: dict[str, Any] = {
        "model": model, "world_id": w.world_id, "domain": w.domain, "cue": w.cue,
        "decision": decision, "outcome": outcome, "arm": arm,
        "sample": reader_sample_index(decision, outcome, arm),
        "memory_sha256": sha256_text(memory) if memory else None,
        "first_tool": None, "reason": None, "y": math.nan, "raw": None, "error": None,
        "finish_reason": None, "structured": None, "call_id": None,
    }
    if result is None:
        row["status"] = "not_scheduled"
        row["error"] = "lesson missing"
        return row
    row.update(raw=result.raw, error=result.error, finish_reason=result.finish_reason,
               structured=bool(result.structured), call_id=result.call_id)
    value = result.value if result.valid else None
    if value is not None and value.get("first_tool") in w.tools:
        row.update(status="valid", first_tool=value["first_tool"], reason=str(value.get("reason", "")))
    else:
        tool = recover_first_tool(result.raw, w.tools)
        if tool is not None:
            row.update(status="recovered", first_tool=tool)
        else:
            row["status"] = "invalid"
            if row["error"] is None:
                row["error"] = "first_tool does not name one of the two tools"
    row["y"] = score(row["first_tool"], w)
    return row


async def read_answers(client: Client, model: str, worlds: list[World], prompts: PromptSet,
                       lessons: pd.DataFrame, max_tokens: int | None = None) -> pd.DataFrame:
    """Run every scheduled reader request concurrently; one row per (world, cell, arm)."""
    lesson_map = {
        (r.world_id, r.instruction, r.decision, r.outcome): (r.lesson if r.status == "ok" else None)
        for r in lessons.itertuples()
    }
    cells = []
    for w in worlds:
        for decision in DECISIONS:
            for outcome in OUTCOMES:
                for arm in ARMS:
                    cells.append((w, decision, outcome, arm,
                                  memory_for(arm, w, decision, outcome, prompts, lesson_map)))
    client.expect(sum(1 for c in cells if c[4] is not None))

    async def one(w: World, decision: str, outcome: str, arm: str, memory: str | None) -> dict[str, Any]:
        if memory is None:
            return answer_row(model, w, decision, outcome, arm, None, None)
        msgs = prompts.reader_messages(w, decision, outcome, memory)
        r = await client.complete_json(
            model, msgs, schema=answer_schema(w), sample=reader_sample_index(decision, outcome, arm),
            max_tokens=max_tokens, purpose=f"luck/reader/{arm}",
        )
        return answer_row(model, w, decision, outcome, arm, memory, r)

    rows = await asyncio.gather(*(one(*c) for c in cells))
    return pd.DataFrame(pa.Table.from_pylist(rows, schema=ANSWER_SCHEMA).to_pandas())


def check_answers(df: pd.DataFrame, source: str) -> None:
    missing = [c for c in ANSWER_SCHEMA.names if c not in df.columns]
    if missing:
        raise ValueError(f"{source}: missing columns {missing}; rerun the luck_readers rule for this model")
