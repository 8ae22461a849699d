"""A router's own account of what answered a call, from its response headers.

A router (a LiteLLM proxy, say) in front of the real servers replaces the body's ``model``
with the name the client asked for, so the body cannot show that another model or base
URL answered, or that a fallback ran.  Its headers can: LiteLLM sends
``x-litellm-model-name`` (the model that answered), ``x-litellm-model-api-base`` (where it
runs), ``x-litellm-model-id``, ``x-litellm-attempted-fallbacks`` / ``-retries`` and
``x-litellm-response-cost`` (dollars).  :func:`account` keeps those present (names and
values as sent) and :func:`apply` folds them into a call's serving fields
(:mod:`memtrials.llm.serving`):

* ``reported_model`` is the header's model where the router sends one (else the body's);
* ``billed_cost`` is the body's ``usage.cost``, else the header's cost, so ``spend`` sees a
  reported cost where the body has none (:func:`reported_spend`);
* ``serving_mismatch`` also says when a fallback ran (``attempted-fallbacks`` above 0);
* ``router``: the headers kept, as canonical JSON, only on calls that carried any, so the
  records and cache entries of every other call are byte for byte what they were
  (:mod:`memtrials.llm.records` writes its column only into a cell's file that has one).
"""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping

from memtrials.llm.cache.keys import canonical_json

HEADERS = (
    "x-litellm-model-name", "x-litellm-model-api-base", "x-litellm-model-id",
    "x-litellm-attempted-fallbacks", "x-litellm-attempted-retries", "x-litellm-response-cost",
)


def account(headers: Iterable[tuple[str, str]] | Mapping[str, str] | None) -> dict[str, str]:
    """The router headers among ``headers`` (lower-cased names; empty when none)."""
    items = headers.items() if isinstance(headers, Mapping) else (headers or ())
    return {str(k).lower(): str(v) for k, v in items if str(k).lower() in HEADERS and str(v) != ""}


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "", "None", "null") else None
    except ValueError:
        return None


def fallbacks(kept: Mapping[str, str]) -> int:
    """How many fallbacks the router says it tried (0 when it does not say)."""
    return int(_number(kept.get("x-litellm-attempted-fallbacks")) or 0)


def apply(serving: Mapping[str, Any], kept: Mapping[str, str]) -> dict[str, Any]:
    """``serving`` (:func:`memtrials.llm.serving.reported` of the body) with the router's
    account folded in (module docstring); unchanged, with no ``router`` key, when ``kept``
    is empty."""
    out = dict(serving)
    if not kept:
        return out
    out["reported_model"] = kept.get("x-litellm-model-name") or out.get("reported_model", "")
    if out.get("billed_cost") is None:
        out["billed_cost"] = _number(kept.get("x-litellm-response-cost"))
    out["router"] = canonical_json(dict(kept))
    return out


def fallback_note(kept: Mapping[str, str]) -> str:
    """The words ``serving_mismatch`` adds when the router fell back ('' otherwise)."""
    n = fallbacks(kept)
    if not n:
        return ""
    where = kept.get("x-litellm-model-api-base")
    return (f"the router fell back (x-litellm-attempted-fallbacks: {n}); answered by "
            f"{kept.get('x-litellm-model-name') or 'an unnamed model'}" + (f" at {where}" if where else ""))


def joined(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def router_of(record: Mapping[str, Any]) -> dict[str, str]:
    """The router headers a record kept ({} for a call that carried none)."""
    value = record.get("router")
    return dict(json.loads(value)) if value else {}


def reported_spend(records: Iterable[Mapping[str, Any]]) -> list[tuple[str, int, float]]:
    """(endpoint, calls, dollars) of the calls whose endpoint reported a cost (``billed_cost``:
    the body's ``usage.cost`` or the router's ``x-litellm-response-cost``), by endpoint."""
    totals: dict[str, list[float]] = {}
    for r in records:
        if r.get("billed_cost") is not None:
            t = totals.setdefault(str(r["endpoint"]), [0, 0.0])
            t[0] += 1
            t[1] += float(r["billed_cost"])
    return [(ep, int(n), usd) for ep, (n, usd) in sorted(totals.items())]
