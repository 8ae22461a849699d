"""Test support for the planted luck agent: a client that answers in process with the
planted policy (no HTTP, no cache), so the statistical checks can play thousands of
worlds; the study's own ``write_lessons`` / ``read_answers`` and analysis run unchanged.
The end-to-end checks (``test_luck_known_answer.py``) go through the real client."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Mapping

import pandas as pd
import yaml

from memtrials.llm.structured import parse_json_reply
from memtrials.studies.luck.prompts import PromptSet
from memtrials.studies.luck.readers import read_answers
from memtrials.studies.luck.worlds import World
from memtrials.studies.luck.writers import write_lessons

DEFAULT_RATES: dict[str, Any] = yaml.safe_load(
    (Path(__file__).resolve().parents[2] / "config" / "models.yaml").read_text())["endpoints"]["planted-luck"][
    "planted"]["params"]
"""The shipped planted-luck entry's rates (config/models.yaml)."""


class DirectClient:
    """``complete`` / ``complete_json`` answered by ``policy(body)``; ``bodies`` keeps every body."""

    def __init__(self, policy: Callable[[Mapping[str, Any]], str]) -> None:
        self.policy, self.bodies, self.n = policy, [], 0

    def expect(self, n: int) -> None:
        pass

    def _text(self, messages: Any, sample: int) -> str:
        body = {"messages": [dict(m) for m in messages], "seed": sample}
        self.bodies.append(body)
        self.n += 1
        return self.policy(body)

    async def complete(self, model: str, messages: Any, *, sample: int = 0, **_: Any) -> Any:
        return SimpleNamespace(text=self._text(messages, sample), finish_reason="stop", call_id=f"c{self.n}",
                               refusal="")

    async def complete_json(self, model: str, messages: Any, schema: Any, *, sample: int = 0, **_: Any) -> Any:
        raw = self._text(messages, sample)
        value, error = parse_json_reply(raw, schema)
        return SimpleNamespace(value=value, valid=error is None, raw=raw, error=error, call_id=f"c{self.n}",
                               structured=True, finish_reason="stop")


def play(policy: Callable[[Mapping[str, Any]], str], worlds: list[World], prompts: PromptSet,
         model: str = "planted-luck") -> tuple[pd.DataFrame, pd.DataFrame]:
    """(lessons, answers) of one planted endpoint on ``worlds``, in process."""
    client = DirectClient(policy)

    async def go() -> tuple[pd.DataFrame, pd.DataFrame]:
        lessons = await write_lessons(client, model, worlds, prompts)  # type: ignore[arg-type]
        answers = await read_answers(client, model, worlds, prompts, lessons)  # type: ignore[arg-type]
        return lessons, answers

    return asyncio.run(go())
