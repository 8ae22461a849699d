"""Two costs of Snakemake 9's job scheduler that grow with the number of jobs, removed.

Measured with ``py-spy`` on a fully cached rerun of the default pipeline (174 short jobs;
``benchmarks/bench_cached_rerun.py``, 3 December): the Snakemake process, which the jobs wait for
between one and the next, was busy for most of the run's wall time.

- **Input sizes every round.**  Before each scheduling round ``JobScheduler.job_selector`` calls
  ``update_input_sizes``, which asks the file system whether every input of every ready job exists
  and how large it is, one asyncio task per path, only to break ties among ready jobs.
  :func:`update_input_sizes` asks only for paths whose size it does not know yet.  A ready job's
  inputs are complete (their producers have finished, and a producer that runs again makes its
  consumers wait until it is done), so a size once read stays right for as long as the path is an
  input of a ready job; a path that did not exist is asked again.
- **A re-evaluation timer per round.**  Every round ends with ``_schedule_reevalutation``: a new
  ``threading.Timer`` that wakes the scheduler one rate-limit timespan later (the job rate limiter,
  ``--max-jobs-per-timespan``, is always on: 100/1s by default).  Each woken round starts another
  timer, so every finished job (whose release also starts a round) adds a chain of one round a
  second that lasts to the end of the run: after a hundred jobs a hundred rounds a second, each
  selecting among the ready jobs and starting a thread.  :func:`schedule_reevaluation` keeps at
  most one timer pending per scheduler, which wakes it as before.

What runs, in which priority order, and every output are unchanged; the sizes only order jobs of
equal priority.  :func:`speed_up_scheduler` (called by ``workflow/rules/common.smk``) installs both
on the Snakemake versions they were written against (:data:`VERSIONS`, each method's signature
checked); anything else is left as it is.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
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


_PENDING = threading.Lock()


def schedule_reevaluation(self: Any, delay: float) -> None:
    """``JobScheduler._schedule_reevalutation``: wake the scheduler after ``delay`` seconds, unless
    a wake-up is pending already (it wakes the scheduler no later than this one would matter:
    the round it starts schedules the next)."""
    with _PENDING:
        timer = getattr(self, "_memtrials_reevaluation", None)
        if timer is not None and not timer.finished.is_set():
            return

        def wake() -> None:
            with _PENDING:
                self._memtrials_reevaluation = None
            self._open_jobs.release()

        timer = threading.Timer(delay, wake)
        self._memtrials_reevaluation = timer
    timer.start()


update_input_sizes.memtrials = True  # type: ignore[attr-defined]
schedule_reevaluation.memtrials = True  # type: ignore[attr-defined]

REPLACED: dict[str, tuple[Any, list[str], bool]] = {
    "update_input_sizes": (update_input_sizes, ["self", "jobs"], True),
    "_schedule_reevalutation": (schedule_reevaluation, ["self", "delay"], False),
}
"""Snakemake's method name -> (its replacement, the parameters it must have, whether a coroutine)."""


def speed_up_scheduler() -> list[str]:
    """Install the replacements on Snakemake's ``JobScheduler``: the names of those in place
    (installed now or before); none where this Snakemake is not one they were written for, and
    a method whose signature differs is left as it is."""
    try:
        import snakemake
        from snakemake.scheduling.job_scheduler import JobScheduler
    except ImportError:
        return []
    if not str(getattr(snakemake, "__version__", "")).startswith(VERSIONS):
        return []
    done = []
    for name, (replacement, params, coroutine) in REPLACED.items():
        current = getattr(JobScheduler, name, None)
        if getattr(current, "memtrials", False):
            done.append(name)
            continue
        if current is None or inspect.iscoroutinefunction(current) != coroutine \
                or list(inspect.signature(current).parameters) != params:
            continue
        setattr(JobScheduler, name, replacement)
        done.append(name)
    return done
