"""Snakemake's job scheduler, told to look up each ready job's input sizes once, not every round.

Before each scheduling round (after every finished job) Snakemake 9's ``JobScheduler.job_selector``
calls ``update_input_sizes``, which asks the file system for the existence and size of every input
of every job that is ready to run, one asyncio task per path, to break ties among ready jobs by
input size.  With the default pipeline's 170-odd short cells most of them are ready at once, so a
fully cached rerun spent about 100 of its 200 s of wall in the Snakemake process doing this
(``py-spy`` on ``benchmarks/bench_cached_rerun.py``, 3 December), while the jobs waited for it.

:func:`memoize_input_sizes` (called by ``workflow/rules/common.smk``) replaces that method with one
that asks only for paths whose size it does not know yet.  A ready job's inputs are complete (their
producers have finished, and a producer that runs again makes its consumers wait until it is done),
so a size once read stays right for as long as the path is an input of a ready job; a path that did
not exist is asked again.  The sizes only order jobs of equal priority; what runs, and every
output, is unchanged.  Applied only to the Snakemake versions it was written against
(:data:`VERSIONS`, with the method's signature checked); anything else is left as it is.
"""

from __future__ import annotations

import asyncio
import inspect
from itertools import filterfalse
from typing import Any, Iterable

VERSIONS = ("9.",)
"""Snakemake major versions whose ``JobScheduler.update_input_sizes`` this replaces."""
LIMIT = 10000
"""Sizes kept before those of paths no ready job needs are dropped (Snakemake's own bound)."""


async def update_input_sizes(self: Any, jobs: Iterable[Any]) -> None:
    """``JobScheduler.update_input_sizes``, asking only for paths whose size is not known yet."""

    async def get_size(path: Any) -> tuple[Any, int | None]:
        return path, await path.size() if await path.exists() else None

    known = self._input_sizes
    paths = {path for job in jobs for path in job.input}
    missing = [path for path in paths if known.get(path) is None]
    if missing:
        known.update(await asyncio.gather(*[get_size(path) for path in missing]))
    if len(known) > LIMIT:
        for path in list(filterfalse(paths.__contains__, known)):
            del known[path]


update_input_sizes.hindsight = True  # type: ignore[attr-defined]


def memoize_input_sizes() -> bool:
    """Install :func:`update_input_sizes` on Snakemake's ``JobScheduler``; ``True`` if installed
    now or before, ``False`` where this Snakemake is not one it was written for."""
    try:
        import snakemake
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return False
    current = getattr(JobScheduler, "update_input_sizes", None)
    if getattr(current, "hindsight", False):
        return True
    version = str(getattr(snakemake, "__version__", ""))
    if current is None or not version.startswith(VERSIONS) or not inspect.iscoroutinefunction(current) \
            or list(inspect.signature(current).parameters) != ["self", "jobs"]:
        return False
    JobScheduler.update_input_sizes = update_input_sizes
    return True
