"""Scripted, deterministic reply policies of the loopback endpoint.

A policy maps the JSON body of a chat-completions request to the assistant's content.
Named policies:

- ``first_admissible``: the first choice of a grammar/enum constraint if the request has
  one, else the first item listed under an "admissible actions" heading in the prompt;
- ``first_enum``: for a ``response_format`` JSON schema, an object with every required
  property filled (enums take their first value); else like ``first_admissible``;
- ``script``: replies from a fixed list, in order (the last one repeats);
- ``random``: a seeded random choice among the admissible actions / enum values, the
  seed mixed with the request's own ``seed`` and content, so a request always gets the
  same reply;
- ``sampled``: like a sampled hosted endpoint, a different reply on every call, even to an
  identical request (a fresh draw among the constrained choices / enum values, else a
  text naming the draw), so a test can tell whose reply a cell kept;
- ``echo``: the last user message;
- ``bad_outputs``: for every request that asks for JSON (a schema) or an action (a
  grammar, an enum or a listed action), a broken reply: empty, truncated, not JSON, or
  JSON of the wrong schema, chosen by a seeded hash of the request; other requests are
  answered like ``first_admissible``.  The policy object keeps what it served (``served``).

Any Python callable ``(body: dict) -> str`` is a policy too.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
from typing import Any, Callable, Mapping, Sequence

Policy = Callable[[Mapping[str, Any]], str]

_ADMISSIBLE = re.compile(r"admissible actions?[^\n:]*:?[ \t]*(.*)$", re.IGNORECASE | re.MULTILINE)
_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+(.+?)\s*$")
_GRAMMAR_ALT = re.compile(r'"((?:[^"\\]|\\.)*)"')


def _last_text(body: Mapping[str, Any]) -> str:
    msgs = body.get("messages") or []
    return "\n".join(str(m.get("content", "")) for m in msgs)


def grammar_choices(body: Mapping[str, Any]) -> list[str]:
    grammar = body.get("grammar")
    if not grammar or not str(grammar).startswith("root ::="):
        return []
    return [json.loads(f'"{s}"') for s in _GRAMMAR_ALT.findall(grammar)]


def schema_of(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The schema of a ``response_format``, or one the prompt asks to follow."""
    fmt = body.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema")
    text = _last_text(body)
    at = text.rfind("JSON schema:")
    if at >= 0:
        try:
            obj, _ = json.JSONDecoder().raw_decode(text[at + len("JSON schema:"):].lstrip())
            return obj if isinstance(obj, dict) else None
        except json.JSONDecodeError:
            return None
    return None


def admissible_in_prompt(text: str) -> list[str]:
    """Items listed after the last 'admissible actions' heading (bullets or a comma list)."""
    matches = list(_ADMISSIBLE.finditer(text))
    if not matches:
        return []
    m = matches[-1]
    inline = m.group(1).strip()
    if inline:
        items = [s.strip().strip("'\"[]") for s in re.split(r",|;", inline)]
        return [s for s in items if s]
    items: list[str] = []
    for line in text[m.end():].splitlines():
        if not line.strip():
            if items:
                break
            continue
        im = _ITEM.match(line)
        if not im:
            break
        items.append(im.group(1))
    return items


def fill_schema(schema: Mapping[str, Any], pick: Callable[[Sequence[Any]], Any] = lambda xs: xs[0]) -> Any:
    """A value that satisfies a (simple) JSON schema; enums via ``pick``."""
    if "enum" in schema:
        return pick(list(schema["enum"]))
    if "const" in schema:
        return schema["const"]
    typ = schema.get("type")
    if isinstance(typ, list):
        typ = next((t for t in typ if t != "null"), "null")
    if typ == "object" or "properties" in schema:
        props = schema.get("properties", {})
        keys = schema.get("required") or list(props)
        return {k: fill_schema(props.get(k, {"type": "string"}), pick) for k in keys}
    if typ == "array":
        return [fill_schema(schema.get("items", {"type": "string"}), pick) for _ in range(schema.get("minItems", 0))]
    if typ == "integer":
        return int(schema.get("minimum", 0))
    if typ == "number":
        return float(schema.get("minimum", 0))
    if typ == "boolean":
        return False
    if typ == "null":
        return None
    return "scripted reply"


def first_admissible(body: Mapping[str, Any]) -> str:
    choices = grammar_choices(body)
    if choices:
        return choices[0]
    schema = schema_of(body)
    if schema is not None:
        return json.dumps(fill_schema(schema))
    items = admissible_in_prompt(_last_text(body))
    return items[0] if items else "look"


def first_enum(body: Mapping[str, Any]) -> str:
    return first_admissible(body)


def echo(body: Mapping[str, Any]) -> str:
    msgs = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    return str(msgs[-1].get("content", "")) if msgs else ""


def _constrained(body: Mapping[str, Any], pick: Callable[[Sequence[Any]], Any]) -> str | None:
    """A reply the request constrains (a grammar's choice or a schema's object), drawn with
    ``pick``; ``None`` for an unconstrained request."""
    choices = grammar_choices(body)
    if choices:
        return pick(choices)
    schema = schema_of(body)
    if schema is not None:
        return json.dumps(fill_schema(schema, pick))
    return None


def seeded_random(seed: int = 0) -> Policy:
    def policy(body: Mapping[str, Any]) -> str:
        digest = hashlib.sha256(json.dumps([seed, body.get("seed"), body.get("messages")], sort_keys=True).encode())
        rng = random.Random(int.from_bytes(digest.digest()[:8], "big"))
        pick = lambda xs: xs[rng.randrange(len(xs))]  # noqa: E731
        constrained = _constrained(body, pick)
        if constrained is not None:
            return constrained
        items = admissible_in_prompt(_last_text(body))
        return pick(items) if items else "look"

    return policy


def sampled(seed: int = 0) -> Policy:
    """A new draw on every call (see the module docstring); thread-safe."""
    draws = itertools.count()

    def policy(body: Mapping[str, Any]) -> str:
        n = next(draws)
        rng = random.Random(f"{seed}/{n}")
        pick = lambda xs: xs[rng.randrange(len(xs))]  # noqa: E731
        constrained = _constrained(body, pick)
        if constrained is not None:
            return constrained
        return f"sampled reply {n} ({rng.getrandbits(32):08x})"

    return policy


def script(replies: Sequence[str]) -> Policy:
    state = {"i": 0}

    def policy(body: Mapping[str, Any]) -> str:
        i = min(state["i"], len(replies) - 1)
        state["i"] += 1
        return replies[i]

    return policy


BAD_KINDS = ("empty", "truncated", "non_json", "wrong_schema")


class BadOutputs:
    """The ``bad_outputs`` policy (module docstring); ``served`` lists ``(kind, text)`` per
    broken reply, ``kinds`` counts them.  Thread-safe."""

    def __init__(self, seed: int = 0) -> None:
        import threading

        self.seed = seed
        self.served: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    @property
    def kinds(self) -> dict[str, int]:
        with self._lock:
            return {k: sum(1 for kind, _ in self.served if kind == k) for k in BAD_KINDS}

    def __call__(self, body: Mapping[str, Any]) -> str:
        choices = grammar_choices(body)
        schema = schema_of(body)
        items = [] if choices or schema is not None else admissible_in_prompt(_last_text(body))
        if not choices and schema is None and not items:
            return first_admissible(body)
        digest = hashlib.sha256(json.dumps([self.seed, body.get("messages")], sort_keys=True).encode()).digest()
        kind = BAD_KINDS[digest[0] % len(BAD_KINDS)]
        good = json.dumps(fill_schema(schema)) if schema is not None else (choices or items)[0]
        if kind == "empty":
            text = ""
        elif kind == "truncated":
            text = good[: max(1, len(good) // 2)]
        elif kind == "non_json":
            text = "Let me think about this.\nI am not sure which one to pick, so I will not answer in the format."
        else:
            text = json.dumps({"answer": 42, "choice": [good[:8]]} if schema is not None else {"action": good})
        with self._lock:
            self.served.append((kind, text))
        return text


def make_policy(spec: str | Policy | Mapping[str, Any]) -> Policy:
    """``"first_admissible"``, ``{"script": [...]}``, ``{"random": seed}``, ``{"sampled": seed}``,
    ``{"bad_outputs": seed}``, or a callable."""
    if callable(spec):
        return spec
    if isinstance(spec, str):
        named: dict[str, Policy] = {
            "first_admissible": first_admissible, "first_enum": first_enum, "echo": echo,
            "random": seeded_random(0), "sampled": sampled(0), "bad_outputs": BadOutputs(0),
        }
        if spec not in named:
            raise ValueError(f"unknown policy {spec!r} (known: {', '.join(sorted(named))}, script, random, sampled)")
        return named[spec]
    if "script" in spec:
        return script(list(spec["script"]))
    if "random" in spec:
        return seeded_random(int(spec["random"]))
    if "sampled" in spec:
        return sampled(int(spec["sampled"]))
    if "bad_outputs" in spec:
        return BadOutputs(int(spec["bad_outputs"]))
    raise ValueError(f"unknown policy spec {dict(spec)!r}")
