"""The cache keys: SHA-256 digests of a request's canonical JSON.

The cache key is the SHA-256 of a canonical JSON of everything that determines a
response: the endpoint identity (base URL + model, or the embedded weights' digest),
the messages, every sampling parameter (seed, temperature, top_p, max_tokens, response
format, grammar, extra body) and the caller's explicit ``sample`` index.  Transport
settings (timeouts, retries) are not part of it.  An embedding is cached per text
(:func:`embed_key`).  Entries never expire: a registered rerun must replay.

The key's bytes are pinned (``tests/test_cache_key_pins.py``): a changed key turns every
cached call of an earlier run into a fresh, paid one.
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping

from memtrials import io


def canonical_json(obj: Any) -> str:
    """The key's canonical JSON: :func:`memtrials.io.canonical_json` on one line, compact
    separators, no trailing newline (the bytes every key so far was made from)."""
    return io.canonical_json(obj, indent=None, newline=False)


def cache_key(identity: Mapping[str, Any], messages: Any, params: Mapping[str, Any], sample: int) -> str:
    """SHA-256 over everything that determines a response."""
    payload = {"endpoint": dict(identity), "messages": messages, "params": dict(params), "sample": int(sample)}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


def embed_key(identity: Mapping[str, Any], text: str, options: Mapping[str, Any]) -> str:
    """SHA-256 of one text's embedding: endpoint identity + the text + dimension/normalisation
    options.  One entry per text, so calls that share some texts reuse those."""
    payload = {"endpoint": dict(identity), "task": "embed", "input": text, "options": dict(options)}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()
