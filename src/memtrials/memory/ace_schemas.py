"""ACE's JSON answers: the Reflector's and the Curator's schemas, by which answers are
judged, and the narrower ones a structured-output endpoint decodes (shown ids, listed
sections, lengths that fit the role's cap) for :class:`memtrials.memory.ace.ACEPlaybook`.
"""

from __future__ import annotations

import json
from typing import Any, Sequence

TAGS = ("helpful", "harmful", "neutral")

def _answer(properties: dict[str, Any]) -> dict[str, Any]:
    """A JSON object with exactly ``properties``, every one required (both roles' answers and
    their list items have this shape)."""
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def _listing(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": _answer(items)}


REFLECTION_SCHEMA: dict[str, Any] = _answer({
    "analysis": {"type": "string"},
    "tags": _listing({"id": {"type": "string"}, "tag": {"type": "string", "enum": list(TAGS)}}),
})
CURATION_SCHEMA: dict[str, Any] = _answer({
    "reasoning": {"type": "string"},
    "operations": _listing({"type": {"type": "string", "enum": ["ADD"]}, "section": {"type": "string"},
                            "content": {"type": "string"}}),
})


def reflection_decoding(ids: Sequence[str], max_tokens: int | None) -> dict[str, Any]:
    """The Reflector's schema as a structured-output endpoint decodes it: tags only for the
    lesson ids the episode was shown, at most one each; with a cap, the analysis at most
    ``max_tokens // 2`` characters and no more tags than fit the rest of the cap (about
    :data:`TAG_TOKENS` each).  Answers are judged by :data:`REFLECTION_SCHEMA`: the bounds
    only keep a small model from looping inside its analysis or its tag list until the cap
    cuts the JSON off (the embedded SmolLM2 did).  The bounds are the project's own."""
    out = json.loads(json.dumps(REFLECTION_SCHEMA))
    shown = list(dict.fromkeys(ids))
    tags, n = out["properties"]["tags"], len(shown)
    if shown:
        tags["items"]["properties"]["id"] = {"type": "string", "enum": shown}
    if max_tokens is not None:
        out["properties"]["analysis"]["maxLength"] = max(1, int(max_tokens) // 2)
        n = min(n, max(0, (int(max_tokens) - int(max_tokens) // 8) // TAG_TOKENS))
    tags["maxItems"] = n
    return out


def curation_decoding(sections: Sequence[str], max_tokens: int | None) -> dict[str, Any]:
    """The Curator's schema as a structured-output endpoint decodes it: sections from the
    listed slugs; with a cap, the reasoning at most ``max_tokens // 2`` characters, each
    lesson at most ``max_tokens`` characters and at most ``max(1, max_tokens //``
    :data:`OPERATION_TOKENS` ``)`` of them, so the answer fits the cap at about four
    characters a token.  Answers are judged by :data:`CURATION_SCHEMA` (see
    :func:`reflection_decoding`)."""
    out = json.loads(json.dumps(CURATION_SCHEMA))
    ops = out["properties"]["operations"]
    ops["items"]["properties"]["section"] = {"type": "string", "enum": list(sections)}
    if max_tokens is not None:
        out["properties"]["reasoning"]["maxLength"] = max(1, int(max_tokens) // 2)
        ops["items"]["properties"]["content"]["maxLength"] = int(max_tokens)
        ops["maxItems"] = max(1, int(max_tokens) // OPERATION_TOKENS)
    return out


TAG_TOKENS = 15
"""Tokens one Reflector tag (``{"id": "str-00001", "tag": "helpful"}``) takes, about."""
OPERATION_TOKENS = 80
"""Tokens one Curator ADD operation takes at its longest, about (its content at most
``max_tokens`` characters, some four a token, and the JSON around it)."""
