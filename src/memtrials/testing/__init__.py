"""Test support: a real OpenAI-compatible loopback endpoint with scripted policies and faults."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from memtrials.testing.policies import make_policy
from memtrials.testing.server import FAULT_KINDS, FINGERPRINT, Faults, LoopbackServer, hash_vector

TEST_KEY_ENV = "MEMTRIALS_LOOPBACK_KEY"


def _with_key(entry: dict[str, Any], api_key_env: str | None, extra: dict[str, Any]) -> dict[str, Any]:
    """``entry`` naming ``api_key_env`` (the test key variable is set if unset), plus ``extra``."""
    if api_key_env:
        entry["api_key_env"] = api_key_env
        if api_key_env == TEST_KEY_ENV:
            os.environ.setdefault(api_key_env, "loopback-test-key")
    entry.update(extra)
    return entry


def loopback_endpoint(
    srv: LoopbackServer, *, structured: bool = True, max_concurrency: int = 8,
    price: tuple[float, float] = (0.0, 0.0), params: dict[str, Any] | None = None,
    api_key_env: str | None = TEST_KEY_ENV, **extra: Any,
) -> dict[str, Any]:
    """A registry entry (as YAML data) pointing at ``srv``."""
    entry: dict[str, Any] = {
        "provider": "openai",
        "base_url": srv.base_url,
        "model": srv.model,
        "max_concurrency": max_concurrency,
        "params": params if params is not None else {"temperature": 0.0, "top_p": 1.0, "max_tokens": 64, "seed": 0},
        "structured_output": structured,
        "price": {"input_per_mtok": price[0], "output_per_mtok": price[1]},
    }
    return _with_key(entry, api_key_env, extra)


def loopback_embed_endpoint(
    srv: LoopbackServer, *, batch_size: int = 8, max_concurrency: int = 4,
    price_per_mtok: float = 0.0, params: dict[str, Any] | None = None,
    api_key_env: str | None = TEST_KEY_ENV, **extra: Any,
) -> dict[str, Any]:
    """A registry entry (as YAML data) for ``srv``'s ``/v1/embeddings`` (``task: embed``)."""
    entry: dict[str, Any] = {
        "provider": "openai", "task": "embed", "base_url": srv.base_url, "model": srv.model,
        "max_concurrency": max_concurrency, "batch_size": batch_size,
        "price": {"input_per_mtok": price_per_mtok, "output_per_mtok": 0.0},
    }
    if params:
        entry["params"] = params
    return _with_key(entry, api_key_env, extra)


def loopback_models_yaml(srv: LoopbackServer, path: str | os.PathLike[str], name: str = "loop", **kw: Any) -> Path:
    """Write a models registry with one entry ``name`` pointing at ``srv``."""
    path = Path(path)
    path.write_text(yaml.safe_dump({"endpoints": {name: loopback_endpoint(srv, **kw)}}, sort_keys=False))
    return path


__all__ = [
    "FAULT_KINDS", "FINGERPRINT", "Faults", "LoopbackServer", "TEST_KEY_ENV", "hash_vector",
    "loopback_embed_endpoint", "loopback_endpoint", "loopback_models_yaml", "make_policy",
]
