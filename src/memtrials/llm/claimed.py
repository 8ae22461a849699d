"""One paid call per cache key across processes, for every kind of call; and replay mode.

Chat completions, embeddings and token counts all go through here before a fresh request:

* :func:`claim` claims one key (:meth:`Cache.claim`): ``True`` (this cell makes the call),
  or the reply another cell stored meanwhile; while another live cell holds the claim it
  waits for that cell's stored reply (or takes the claim over once its owner is gone).
* :func:`pay_once` does the same for many keys that go out in batches (the texts of an
  embeddings request, the texts of a token count): it claims every key at once, sends the
  batches of the keys it claimed, and waits for the others' stored replies meanwhile, so
  two jobs embedding the same text at the same moment pay for it once (before, embeddings
  and counts were de-duplicated within one process only and relied on first-stored-wins
  across processes, after both had paid).  A batch that fails gives its claims back.
* In replay mode (``cache.mode: replay``) a cell answers only from the cache: :func:`refuse_fresh`
  stops any call the cache does not hold with :class:`ReplayMiss`, naming the cell, the
  endpoint, the missing entry's key and the start of its request.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Sequence

from memtrials.llm.results import CallFailed

if TYPE_CHECKING:
    from memtrials.llm.calls import Calls

Item = tuple[str, str]  # (cache key, the text or request it stands for)


class ReplayMiss(CallFailed):
    """Replay mode met a call the response cache does not hold."""


def refuse_fresh(client: "Calls", endpoint: str, key: str, what: str, request: str) -> None:
    """In replay mode, refuse a call whose reply is not in the cache (module docstring)."""
    if not client.replay:
        return
    shown = request if len(request) <= 160 else request[:157] + "..."
    article = "an" if what[:1] in ("a", "e", "i", "o", "u") else "a"
    raise ReplayMiss(
        f"replay mode (cache.mode: replay): cell '{client.cell_id}' needs {article} {what} on endpoint '{endpoint}' "
        f"that the response cache ({client.cache_path}) does not hold: missing entry {key} for {shown!r}. "
        f"Replay makes no model call. Fix: use the cache this run's tables were made from, or set "
        f"cache.mode: use (with the endpoint up and its key set) to make the missing calls.")


async def claim(client: "Calls", key: str) -> dict[str, Any] | bool:
    """Claim ``key`` before calling: ``True``, or the reply another cell stored; while
    another cell holds it, wait for its stored reply (or take the claim over once its
    owner is gone)."""
    delay = 0.05
    while True:
        got = client.cache.claim(key, client.owner, client.claim_stale_s)
        if got is not False:
            return got
        await asyncio.sleep(delay)
        delay = min(delay * 1.5, 1.0)


async def pay_once(
    client: "Calls", items: Sequence[Item], batch_size: int,
    send: Callable[[list[Item]], Awaitable[list[tuple[str, dict[str, Any]]]]],
) -> dict[str, tuple[dict[str, Any], bool]]:
    """Each key's record and whether it was another cell's (``True``: replayed), for ``items``
    that missed the cache: the keys this cell claims go out through ``send`` in batches of
    ``batch_size`` (its stored records), the others are awaited (module docstring)."""
    out: dict[str, tuple[dict[str, Any], bool]] = {}
    todo, delay = list(items), 0.05
    while todo:
        mine: list[Item] = []
        theirs: list[Item] = []
        for key, text in todo:
            got = client.cache.claim(key, client.owner, client.claim_stale_s)
            if isinstance(got, dict):
                out[key] = (got, True)
            elif got:
                mine.append((key, text))
            else:
                theirs.append((key, text))
        batches = [mine[i:i + batch_size] for i in range(0, len(mine), batch_size)]
        settled: set[str] = set()
        try:
            outcomes = await asyncio.gather(*(send(b) for b in batches), return_exceptions=True)
            failure: BaseException | None = None
            for outcome in outcomes:
                if isinstance(outcome, BaseException):
                    failure = failure or outcome
                    continue
                for key, record in outcome:
                    out[key] = (record, False)
                    settled.add(key)
            if failure is not None:
                raise failure
        finally:  # a failed or cancelled batch gives its claims back, so another cell may call
            for key, _ in mine:
                if key not in settled:
                    client.cache.release(key, client.owner)
        todo = theirs
        if todo:
            await asyncio.sleep(delay)
            delay = min(delay * 1.5, 1.0)
    return out
