"""Scripted actor policies for the loopback endpoint (real HTTP, real environments)."""

from __future__ import annotations

import json
import re
from typing import Any, Callable, Mapping

from memtrials.agent.prompts import task_clause


def wrap(body: Mapping[str, Any], action: str) -> str:
    """Answer in the form the request asks for: a JSON enum object or plain text."""
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or {}
    if "answer" in (schema.get("properties") or {}):
        return json.dumps({"answer": action})
    return action


_STEP = re.compile(r"are now at step (\d+)\.")


def step_of(body: Mapping[str, Any]) -> int:
    """The 1-based step an actor request asks for (block: the prompt says it; chat: count actions)."""
    msgs = body.get("messages") or []
    m = _STEP.search(str(msgs[-1].get("content", "")))
    if m:
        return int(m.group(1))
    return 1 + sum(1 for x in msgs if x.get("role") == "assistant")


def is_review(body: Mapping[str, Any]) -> bool:
    msgs = body.get("messages") or []
    return bool(msgs) and "calibrating your own prior interaction history" in str(msgs[0].get("content", ""))


def is_judge(body: Mapping[str, Any]) -> bool:
    msgs = body.get("messages") or []
    return bool(msgs) and "supports_repetition" in str(msgs[0].get("content", ""))


def actor_policy(act: Callable[[Mapping[str, Any]], str], review: str,
                 judge: str) -> Callable[[Mapping[str, Any]], str]:
    """Answer a review request with ``review``, a probe judge's with ``judge``, and an actor's
    with ``act(body)``."""

    def policy(body: Mapping[str, Any]) -> str:
        if is_review(body):
            return review
        if is_judge(body):
            return judge
        return act(body)

    return policy


def gold_policy(gold: Mapping[str, list[str]], review: str = '{"decision":"NOUPDATE","experience":null}',
                judge: str = '{"supports_repetition": false}') -> Callable[[Mapping[str, Any]], str]:
    """Follow each task's gold path (task found by its description in the prompt)."""

    def act(body: Mapping[str, Any]) -> str:
        text = "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])
        for desc, actions in gold.items():
            if task_clause(desc) in text:  # the prompt holds the task without its leading "Your task is to"
                k = step_of(body) - 1
                return wrap(body, actions[k] if k < len(actions) else actions[-1])
        raise AssertionError("no known task in the prompt")

    return actor_policy(act, review, judge)


def repeat_policy(action: str, review: str = '{"decision":"CALIBRATE","experience":"Repeating did not help."}',
                  judge: str = '{"supports_repetition": false}') -> Callable[[Mapping[str, Any]], str]:
    """Always the same action (a repetition the probe must select)."""
    return actor_policy(lambda body: wrap(body, action), review, judge)
