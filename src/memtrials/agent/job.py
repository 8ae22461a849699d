"""One job's set-up for playing episodes, written once: environment pool, recording client, runner.

Every job that plays episodes (the history study's rollout, continuation and joint-actor
cells, the playbook and anti-persistence studies' jobs) opens the same three things in
the same order: an :class:`~memtrials.envs.pool.EnvPool` of the job's environment, a
model client that caches and records every call to the job's records file
(:func:`memtrials.llm.open_client`), and the :class:`~memtrials.agent.runner.Runner` over
them with the actor prompts.  :func:`open_job` does it; the pool's size is
:func:`pool_size` of the job's ``in_flight`` and number of episodes.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Mapping

from memtrials.agent.order import REQUEST_ORDERS
from memtrials.agent.prompts import ActorPrompts
from memtrials.agent.runner import Runner
from memtrials.envs.base import Env
from memtrials.envs.pool import EnvPool, env_factory
from memtrials.llm import open_client

if TYPE_CHECKING:
    from memtrials.llm import Client

__all__ = ["open_job", "pool_size"]


def pool_size(in_flight: int, episodes: int | None = None) -> int:
    """Environments a job needs: ``min(in_flight, episodes)``, at least one (``episodes``
    None: ``in_flight``, for a job that plays its episodes in batches of unknown size)."""
    return max(1, int(in_flight) if episodes is None else min(int(in_flight), int(episodes)))


@asynccontextmanager
async def open_job(config: Mapping[str, Any], cell_id: str, out_calls: str,
                   prompts: ActorPrompts | str | Path, *, env: str, in_flight: int,
                   episodes: int | None = None, env_options: Mapping[str, Any] | None = None,
                   make_env: Callable[[], Env] | None = None) -> AsyncIterator[tuple[Runner, Client]]:
    """Yield ``(runner, client)`` for job ``cell_id``: a runner playing up to ``in_flight``
    episodes at once over a pool of :func:`pool_size` ``(in_flight, episodes)`` environments
    (``make_env``, else ``env`` built with ``env_options``), with the actor ``prompts`` (or
    the folder they are loaded from), and the client recording to ``out_calls``."""
    if not isinstance(prompts, ActorPrompts):
        prompts = ActorPrompts.load(prompts)
    async with EnvPool(make_env or env_factory(env, env_options), pool_size(in_flight, episodes)) as pool, \
            open_client(config, cell_id, out_calls) as client:
        # request.order is optional in a config's request section, as its back-off keys are
        order = str(dict(config.get("request") or {}).get("order", REQUEST_ORDERS[0]))
        yield Runner(client, pool, prompts, in_flight=int(in_flight), request_order=order), client
