"""Structured replies: JSON-schema answers and replies constrained to a list of strings."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Mapping, Sequence

import jsonschema

_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.MULTILINE)


def json_instruction(schema: Mapping[str, Any]) -> str:
    """What is appended to the prompt when the endpoint cannot enforce a schema."""
    return (
        "\n\nRespond with only a JSON object (no other text) that matches this JSON schema:\n"
        + json.dumps(schema, sort_keys=True)
    )


def response_format(schema: Mapping[str, Any], name: str) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": name, "schema": dict(schema), "strict": True}}


def extract_json(text: str) -> Any:
    """Parse the first JSON object in ``text`` (bare, fenced, or embedded in prose)."""
    stripped = _FENCE.sub("", text.strip()).strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError:
        pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(stripped):
        if ch == "{":
            try:
                obj, _ = decoder.raw_decode(stripped[i:])
                return obj
            except json.JSONDecodeError:
                continue
    raise ValueError("no JSON object found in the reply")


def parse_json_reply(text: str, schema: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """Return ``(value, None)`` for a valid answer, ``(None, reason)`` otherwise."""
    try:
        value = extract_json(text)
    except ValueError as exc:
        return None, str(exc)
    if not isinstance(value, dict):
        return None, f"reply is JSON but not an object ({type(value).__name__})"
    exc = jsonschema.exceptions.best_match(_validator(json.dumps(schema, sort_keys=True)).iter_errors(value))
    if exc is not None:
        where = ".".join(str(p) for p in exc.absolute_path) or "(top level)"
        return None, f"reply does not match the schema at {where}: {exc.message}"
    return value, None


@functools.lru_cache(maxsize=512)
def _validator(schema_json: str) -> Any:
    """The checked validator of one schema (what ``jsonschema.validate`` builds on every
    call: checking the schema against its meta-schema took about 9 ms a reply)."""
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def gbnf_choice(choices: Sequence[str]) -> str:
    """A llama.cpp GBNF grammar whose language is exactly ``choices``."""
    if not choices:
        raise ValueError("choices must not be empty")

    def lit(s: str) -> str:
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r") + '"'

    return "root ::= " + " | ".join(lit(c) for c in choices)


def gbnf_actions(literals: Sequence[str], calls: Sequence[str], max_chars: int,
                 words: Sequence[str] | None = None, max_words: int = 8) -> str:
    """A llama.cpp GBNF grammar whose language is ``literals`` plus, for each name in
    ``calls``, ``name[text]`` with 1 to ``max_chars`` characters of text (no ``]``, no line
    break, not starting with ``<`` or a space, so the placeholder itself cannot be copied): a listed
    action copied, or a template action (a search bar) filled in.  It starts
    with a comment line, so it is not read as a choice list (:func:`gbnf_choice`'s form)."""
    if not literals and not calls:
        raise ValueError("literals and calls must not both be empty")
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    alts = [gbnf_choice(literals)[len("root ::= "):]] if literals else []
    alts += [gbnf_choice([f"{name}["])[len("root ::= "):] + ' arg "]"' for name in calls]
    head = ["# listed actions, or a template action with its text filled in", "root ::= " + " | ".join(alts)]
    if words:  # the text: 1 to max_words of ``words`` (e.g. the task's), separated by single spaces
        return "\n".join(head + [f'arg ::= word (" " word){{0,{max(0, int(max_words) - 1)}}}',
                                  "word ::= " + gbnf_choice(list(dict.fromkeys(words)))[len("root ::= "):]])
    return "\n".join(head + [f"arg ::= [^<\\]\\n\\r \\t] [^\\]\\n\\r]{{0,{max_chars - 1}}}"])


def gbnf_joint(choices: Sequence[str], max_chars: int) -> str:
    """A llama.cpp GBNF grammar for a joint actor's reply (section 6.4 / Appendix G.3): one
    ``<calibration>`` block holding one of the two review outputs (``NOUPDATE``, or
    ``CALIBRATE`` with an experience of 8 (or ``max_chars``, if fewer) to ``max_chars``
    characters, starting with a letter, with no ``<``, quote, backslash or line break), then ``<action>`` + exactly one of
    ``choices`` + ``</action>``.  It starts with a comment line, so it is not read as a
    choice list (:func:`gbnf_choice`'s form)."""
    if not choices:
        raise ValueError("choices must not be empty")
    if max_chars < 1:
        raise ValueError(f"max_chars must be >= 1, got {max_chars}")
    acts = gbnf_choice(choices)[len("root ::= "):]
    head = '"{\\"decision\\":\\"'
    return "\n".join([
        "# joint reply: <calibration>{review output}</calibration><action>listed action</action>",
        'root ::= "<calibration>" review "</calibration>" "<action>" act "</action>"',
        f'review ::= {head}NOUPDATE\\",\\"experience\\":null}}" | '
        f'{head}CALIBRATE\\",\\"experience\\":\\"" exp "\\"}}"',
        f"exp ::= [A-Za-z] [^<\"\\\\\\n\\r\\t]{{{min(7, max_chars - 1)},{max_chars - 1}}}",
        f"act ::= {acts}",
    ])


def choice_schema(choices: Sequence[str]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": list(choices)}},
        "required": ["answer"],
        "additionalProperties": False,
    }
