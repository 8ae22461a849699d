"""Planted agents: registry entries of ``provider: planted`` (the known-answer runs, issue 38).

Such an entry names a policy factory (``planted.policy: <module>:<callable>``, data of
``config/models.yaml``; this layer names no study) and its ``params``.  When a cell first calls
the endpoint, :class:`PlantedServer` imports the factory, calls it with the params to get a
policy ``(body) -> str`` and serves it on the project's loopback OpenAI-compatible server
(:class:`memtrials.testing.server.LoopbackServer`) in this process, so every call goes through
the real client, cache and records, as a hosted model's would.

A policy's random draws must be a function of the request's content (messages, the seed of
its sample index, its constraints), so the same request gets the same reply from the server
as from the cache and a rerun replays byte for byte (the planted world's policies draw with
``memtrials.envs.planted.agent.uniform``).
"""

from __future__ import annotations

import importlib
from typing import Any, Callable, Mapping

from memtrials.config import ConfigError, Endpoint

Policy = Callable[[Mapping[str, Any]], str]


def build_policy(ep: Endpoint) -> Policy:
    """The reply policy of planted endpoint ``ep``: its factory called with its params."""
    if ep.planted is None:
        raise ConfigError(f"{ep.source}: endpoint '{ep.name}' is not a planted endpoint (provider planted).")
    module, _, name = ep.planted.policy.partition(":")
    try:
        factory = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{ep.source}: endpoint '{ep.name}': key planted.policy {ep.planted.policy!r} cannot be "
                          f"imported ({exc}). Fix: name an existing <module>:<callable>.") from None
    try:
        policy = factory(**dict(ep.planted.params))
    except TypeError as exc:
        raise ConfigError(f"{ep.source}: endpoint '{ep.name}': key planted.params does not fit "
                          f"{ep.planted.policy} ({exc}). Fix: give only the factory's keyword arguments.") from None
    if not callable(policy):
        raise ConfigError(f"{ep.source}: endpoint '{ep.name}': {ep.planted.policy} returned {type(policy).__name__}, "
                          "not a policy (body) -> str.")
    return policy


class PlantedServer:
    """The loopback server of one planted endpoint in this process: ``start() -> base_url``, ``stop()``."""

    def __init__(self, ep: Endpoint) -> None:
        self.ep = ep
        self._server: Any = None

    def start(self) -> str:
        from memtrials.testing.server import LoopbackServer

        self._server = LoopbackServer(policy=build_policy(self.ep), model=self.ep.served_alias,
                                      tokenize=True).start()
        return str(self._server.base_url)

    @property
    def requests(self) -> int:
        """Chat completions this server answered (0 before :meth:`start`)."""
        return 0 if self._server is None else int(self._server.stats.completions)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None
