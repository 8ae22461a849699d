"""The id of the current run, shared by every job of one Snakemake invocation.

A module of its own (standard library only) because the workflow sets the id while it
parses, and the parse must not load the client and the ``openai`` SDK: every local job
parses the workflow again.
"""

from __future__ import annotations

import datetime as dt
import os

RUN_ID_ENV = "MEMTRIALS_RUN_ID"


def run_id() -> str:
    """The id of the current run (one Snakemake invocation sets it for all its jobs)."""
    rid = os.environ.get(RUN_ID_ENV)
    if not rid:
        rid = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"
        os.environ[RUN_ID_ENV] = rid
    return rid
