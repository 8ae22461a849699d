"""Locking a registered run's records (*Lessons from Luck*, section 3.5, "Run and
analysis": the run was locked with a completion manifest and the analysis read it
through that lock).

When the analysis first finds every panel endpoint's records complete (12 lessons and
32 reader cells per world, with their call records), it writes their SHA-256 into the
registered manifest (``registered.json``, key ``lock``); every later analysis verifies
them and refuses to read records that changed.  Before locking it checks that every call
sent the parameters the freeze registered (the model id, the provider pin and the
sampling parameters of the endpoint's ``sent`` entry in the config slice), and that every
reply was served as the registry says (:mod:`memtrials.llm.serving`: the model the endpoint
reported, the provider a router names): a registered run refuses a call served otherwise,
a run on thresholds that are not registered logs it and goes on.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.llm.serving import log as serving_log

from memtrials.studies.luck.design import ARMS, DECISIONS, INSTRUCTIONS, OUTCOMES
from memtrials.studies.luck.freeze import (
    REFREEZE, FreezeMismatch, read_registered, sha256_file, write_registered,
)

PER_WORLD = {"lessons": len(INSTRUCTIONS) * len(DECISIONS) * len(OUTCOMES),
             "answers": len(DECISIONS) * len(OUTCOMES) * len(ARMS)}
# parameters that differ per request by design: the seed (entry seed + sample index), the
# reader's schema (per world), a grammar (per request); the pin is compared on its own
PER_REQUEST = ("seed", "response_format", "grammar", "extra_body")


def incomplete(table: pd.DataFrame, kind: str, world_ids: Sequence[str]) -> list[str]:
    """What a lessons or answers table lacks for a complete run (empty: complete)."""
    want = PER_WORLD[kind]
    counts = table.groupby("world_id").size() if len(table) else pd.Series(dtype=int)
    out = [f"world {w}: {int(counts.get(w, 0))} of {want} rows" for w in world_ids
           if int(counts.get(w, 0)) != want]
    return out


def check_sent(calls: pd.DataFrame, source: str, endpoint: Mapping[str, Any], role: str,
               registered_run: bool = True) -> None:
    """Refuse records whose requests differ from what the freeze registered for ``role``,
    and (``registered_run``; otherwise a warning) records served by another model or
    provider than the registry names."""
    frozen = endpoint["sent"][role]
    want = {k: v for k, v in frozen["params"].items() if k not in PER_REQUEST}
    model = (endpoint.get("identity") or {}).get("model")
    for r in calls.itertuples():
        params = json.loads(r.params)
        got = {k: v for k, v in params.items() if k not in PER_REQUEST}
        problems = []
        if got != want:
            problems.append(f"sent sampling parameters {got} (registered {want})")
        if dict(params.get("extra_body") or {}) != dict(frozen["extra_body"]):
            problems.append(f"sent provider pin / extra body {params.get('extra_body')} "
                            f"(registered {frozen['extra_body']})")
        if model is not None and r.model != model:
            problems.append(f"sent model id {r.model!r} (registered {model!r})")
        served = getattr(r, "serving_mismatch", None)
        if served and isinstance(served, str):
            if registered_run:
                problems.append(f"was served otherwise than the registry says ({served})")
            else:
                serving_log.warning("%s: call %s %s (not a registered run: kept)", source, r.call_id, served)
        if problems:
            raise FreezeMismatch(
                f"{source}: call {r.call_id} {'; '.join(problems)}. The records were not made "
                f"under the registered freeze: rerun luck_writers/luck_readers under it, or re-freeze "
                f"on purpose ({REFREEZE})")


def lock_or_verify(registered_path: str | os.PathLike[str], files: Sequence[str]) -> dict[str, Any]:
    """Lock ``files`` (first complete analysis) or verify them against the lock."""
    reg = read_registered(registered_path)
    current = {str(f): sha256_file(f) for f in files}
    lock = reg.get("lock")
    if lock is None:
        reg["lock"] = {"at": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
                       "records": current}
        write_registered(reg, registered_path)
        return reg["lock"]
    locked = lock["records"]
    diff = [f"{f}: {'new' if f not in locked else 'removed' if f not in current else 'changed'}"
            for f in sorted(set(locked) | set(current)) if locked.get(f) != current.get(f)]
    if diff:
        raise FreezeMismatch(
            f"the records of the registered run were locked in {registered_path} at {lock['at']} "
            f"and have changed since:\n  " + "\n  ".join(diff) + "\n"
            f"A locked run's records are final. Restore them (a rerun of luck_writers/luck_readers "
            f"under the same freeze replays every call from the cache), or start a new registered "
            f"run on purpose: {REFREEZE} {registered_path}")
    return lock


def records_of(answers: Sequence[str], lessons: Sequence[str]) -> list[str]:
    """The files a lock covers: each endpoint's lessons and answers and their call records."""
    out = []
    for p in [*lessons, *answers]:
        out.append(str(p))
        calls = Path(p).with_suffix(".calls.parquet")
        if calls.exists():
            out.append(str(calls))
    return out
