"""The serving contract: who actually answered a call, and what it was billed.

An endpoint's reply says which model produced it (``model``) and, behind a router such
as OpenRouter, which provider served it (``provider``); a router may also report the
billed cost (``usage.cost``).  Every call record keeps these beside the registry's
model id and the price-based estimate (``reported_model``, ``reported_provider``,
``billed_cost``), and ``serving_mismatch`` says in words where the reply disagrees with
the registry (empty when it agrees), so a reader sees per call when a router silently
substituted a model or a provider.

What the registry expects (:func:`expected`): the entry's ``serving`` key when given
(``models``: the reported ids accepted, e.g. a dated variant of the requested id;
``providers``: the providers accepted); otherwise the entry's ``model`` id, and the
providers of a provider pin without fallbacks (``extra_body.provider.order`` with
``allow_fallbacks: false``).  A reply that reports no model or no provider is not a
mismatch (many servers report neither) but its empty field is visible in the record; nor
is the model an embedded entry's server reports (the pipeline starts it on weights whose
hash it checked, under the entry's served alias, which a trained checkpoint's digest extends).

A registered run refuses records with a mismatch (the luck study's check); any other run
gets one warning per endpoint and kind of mismatch (:class:`MismatchWarnings`).
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Mapping

log = logging.getLogger("memtrials.llm")


def reported(data: Mapping[str, Any]) -> dict[str, Any]:
    """The serving fields of a chat-completion or embeddings body (absent: empty / None)."""
    usage = data.get("usage") or {}
    provider = data.get("provider")
    if isinstance(provider, Mapping):  # some routers nest it: {"provider": {"name": ...}}
        provider = provider.get("name")
    cost = usage.get("cost") if isinstance(usage, Mapping) else None
    billed = float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None
    return {"reported_model": str(data.get("model") or ""), "reported_provider": str(provider or ""),
            "billed_cost": billed}


def expected(ep: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(accepted reported model ids, accepted providers; empty: any) for a registry entry."""
    serving = dict(getattr(ep, "serving", None) or {})
    models = tuple(serving.get("models") or (ep.model,))
    providers = tuple(serving.get("providers") or ())
    if not providers:
        pin = dict(ep.extra_body or {}).get("provider")
        if isinstance(pin, Mapping) and pin.get("allow_fallbacks") is False and pin.get("order"):
            providers = tuple(str(p) for p in pin["order"])
    return models, providers


def mismatch(ep: Any, reported_model: str, reported_provider: str) -> str:
    """Where a reply disagrees with the registry entry ``ep``, in words ('' when it agrees)."""
    models, providers = expected(ep)
    problems = []
    # an embedded entry's server is started by the pipeline on weights whose SHA-256 it
    # checked, named by its served alias (a checkpoint's carries a digest the entry's model lacks)
    embedded = getattr(ep, "provider", "") == "embedded"
    # a router names the deployment with its provider's prefix ("openai/<id>"): the id decides
    if reported_model and not embedded and reported_model not in models \
            and reported_model.split("/", 1)[-1] not in models:
        problems.append(f"reported model {reported_model!r}, registry expects {' or '.join(map(repr, models))}")
    if reported_provider and providers and reported_provider.lower() not in {p.lower() for p in providers}:
        problems.append(f"served by provider {reported_provider!r}, registry pins {' or '.join(map(repr, providers))}")
    return "; ".join(problems)


class MismatchWarnings:
    """One logged warning per (endpoint, mismatch text) for runs that are not registered."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def note(self, endpoint: str, text: str, source: str) -> None:
        if not text:
            return
        with self._lock:
            if (endpoint, text) in self._seen:
                return
            self._seen.add((endpoint, text))
        log.warning("endpoint '%s' (%s): %s. Every such call is marked in its record's serving_mismatch "
                    "column; a registered run refuses them. Fix: correct the entry's model id or provider "
                    "pin, or list the accepted ids under its serving: key.", endpoint, source, text)
