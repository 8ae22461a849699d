"""Model layer: async client with limits, retries, cache, records and cost caps.

Public API::

    async with open_client(config, cell_id, records_path) as client:
        r = await client.complete(model, messages, sample=0)
        j = await client.complete_json(model, messages, schema=..., sample=0)
        e = await client.embed(config["roles"]["embedder"], ["a text", "another"])

Names are imported on first use, so that the local servers' child processes
(``memtrials.llm.local.embedded``, ``memtrials.llm.local.embedder``) start without loading the
client and the ``openai`` SDK.
"""

from __future__ import annotations

from memtrials.lazy import lazy_names

_WHERE = {
    "Cache": "cache.sqlite", "cache_key": "cache.keys", "Client": "client", "RECORD_SCHEMA": "records",
    "read_records": "records", "open_client": "session", "run_id": "runs",
    "BudgetExceeded": "results", "CallFailed": "results", "ChatResult": "results", "EmbedResult": "results",
    "JSONResult": "results", "LLMError": "results", "Usage": "results",
}

__all__ = sorted(_WHERE)
__getattr__, __dir__ = lazy_names(__name__, _WHERE, submodules=True)
