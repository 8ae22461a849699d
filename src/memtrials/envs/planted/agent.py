"""What every planted agent policy shares: the seeded draw, the reading of a prompt, a reply.

A planted policy (``provider: planted`` in ``config/models.yaml``; :mod:`memtrials.llm.local.planted`
serves it) sees only the request body, as a hosted model would.  These helpers let a policy

* draw: :func:`uniform` -- a number in [0, 1) from the request's content (messages, its sample's
  seed, its constraints) and a label, so the same request always gets the same reply (from the
  loopback server as from the cache);
* read: :func:`prompt_text` (every message), :func:`options` (the actions it may answer: a
  grammar's or a JSON schema's choices, else the actions the prompt lists); the world's
  :func:`~memtrials.envs.planted.world.current_code` and ``right_option`` find the right one;
* answer: :func:`reply` in the form the request asks (the bare choice, or a JSON object).

:func:`reader` is the plain planted agent: the right action with probability ``p_right``, else a
uniformly drawn wrong one (the core's tests and any study without planted effects of its own).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable, Mapping, Sequence

from memtrials.envs.planted.world import current_code, right_option

Policy = Callable[[Mapping[str, Any]], str]
DRAWN_FIELDS: tuple[str, ...] = ("messages", "seed", "response_format", "grammar")
"""The request fields a planted draw depends on (:func:`uniform`)."""
_ACTION_KEYS = ("action", "answer", "next_action", "choice")


def uniform(body: Mapping[str, Any], *label: Any) -> float:
    """A number in [0, 1) drawn from the request ``body`` (its :data:`DRAWN_FIELDS`) and
    ``label`` (what the draw decides): the same request and label give the same number."""
    fields = {k: body.get(k) for k in DRAWN_FIELDS}
    text = json.dumps({"request": fields, "label": [str(x) for x in label]}, sort_keys=True, ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") / 2**64


def prompt_text(body: Mapping[str, Any]) -> str:
    """Every message's content, in order, one after another."""
    return "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])


def _schema(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") if fmt.get("type") == "json_schema" else None


def _enum_key(schema: Mapping[str, Any]) -> str | None:
    props = schema.get("properties") or {}
    for key in (*_ACTION_KEYS, *props):
        if key in props and "enum" in props[key]:
            return key
    return None


def options(body: Mapping[str, Any]) -> list[str]:
    """The actions the request lets the agent answer: a GBNF grammar's alternatives, a JSON
    schema's enum, else the items the prompt lists under its last "admissible actions" heading."""
    from memtrials.testing.policies import admissible_in_prompt, grammar_choices

    choices = grammar_choices(body)
    if choices:
        return choices
    schema = _schema(body)
    if schema is not None:
        key = "enum" if "enum" in schema else _enum_key(schema)
        if key == "enum":
            return [str(x) for x in schema["enum"]]
        if key is not None:
            return [str(x) for x in schema["properties"][key]["enum"]]
    return admissible_in_prompt(prompt_text(body))


def reply(body: Mapping[str, Any], action: str) -> str:
    """``action`` in the form the request asks: a JSON object for a schema (its enum property
    set to the action, other required fields filled), else the bare action."""
    schema = _schema(body)
    if schema is None:
        return action
    if "enum" in schema:
        return json.dumps(action)
    from memtrials.testing.policies import fill_schema

    key = _enum_key(schema)
    obj = fill_schema(schema)
    if isinstance(obj, dict) and key is not None:
        obj[key] = action
    return json.dumps(obj)


def pick(body: Mapping[str, Any], p_right: float, opts: Sequence[str], right: str | None, label: str = "act") -> str:
    """The right option with probability ``p_right`` (one draw of :func:`uniform`), else one of
    the others drawn uniformly; with no right option known, a uniform draw among all."""
    opts = list(opts)
    if not opts:
        return "look"
    u = uniform(body, label, "right")
    wrong = [o for o in opts if o != right]
    if right is not None and (u < p_right or not wrong):
        return right
    pool = wrong if right is not None else opts
    return pool[int(uniform(body, label, "which") * len(pool))]


def reader(p_right: float = 0.7) -> Policy:
    """The plain planted agent: in the planted world, the right action (read from the last cue
    of its prompt) with probability ``p_right``, else a uniformly drawn wrong one."""
    if not 0.0 <= float(p_right) <= 1.0:
        raise ValueError(f"reader: p_right {p_right!r} is not a probability")

    def policy(body: Mapping[str, Any]) -> str:
        opts = options(body)
        return reply(body, pick(body, float(p_right), opts, right_option(current_code(prompt_text(body)), opts)))

    return policy


def episode_uniform(body: Mapping[str, Any], *label: Any) -> float:
    """A number in [0, 1) that is the same at every step of one episode: drawn from the request's
    seed, everything the prompt shows up to its task line (system prompt, served memory, the
    task) and the episode's first cue (its start observation, the first one after the task line).
    A policy that decides a whole episode with it (right at every step, or wrong at every step)
    makes the episode succeed with exactly its chance of the right action."""
    from memtrials.envs.planted.world import CUES

    text = prompt_text(body)
    at = text.rfind("Your task is to:")
    end = text.find("\n", at) if at >= 0 else -1
    head, tail = (text, "") if at < 0 else (text if end < 0 else text[:end], "" if end < 0 else text[end:])
    first = CUES.search(tail)
    key = json.dumps({"seed": body.get("seed"), "head": head, "start": first.group(0) if first else "",
                      "label": [str(x) for x in label]}, sort_keys=True, ensure_ascii=False)
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


def act(body: Mapping[str, Any], right: bool) -> str:
    """The planted world's step in the form the request asks: the right action (read from the
    prompt's last cue) if ``right``, else a wrong one drawn uniformly (by :func:`uniform`)."""
    opts = options(body)
    good = right_option(current_code(prompt_text(body)), opts)
    return reply(body, pick(body, 1.0 if right else 0.0, opts, good, label="episode"))
