"""Reliability drill: bad model output is recorded as invalid with its raw text; no cell crashes.

The loopback endpoint answers with the ``bad_outputs`` policy
(:class:`memtrials.testing.policies.BadOutputs`): every request that asks for JSON or an
action gets an empty, truncated, non-JSON or wrong-schema reply (a seeded hash of the
request picks which); free-text requests (the luck writers' lessons) are answered
normally.  Then a real luck cell (writers, then readers: JSON answers), real history
rollout cells on ScienceWorld (Raw: actions; Experience: actions and JSON reviews), the
playbook study's ACE and Dynamic Cheatsheet growth and practice cells on generated ALFWorld
games (actions, Reflector and Curator JSON), and anti-persistence training streams with their
evaluation (ExpeL, AutoRefine, abstraction, Reflexion on ScienceWorld: actions and synthesis
JSON) run through the functions their rules call, in a temporary folder (``--studies``
picks some).

Counted: every broken reply the server sent must appear in a row of the cell's table (a
row replayed from the cache carries it again), and every row that carries one must be not valid
(a luck answer ``invalid``, or ``recovered`` where the registered recovery rule reads the
tool from a truncated answer; a history step ``unparsable`` / ``inadmissible``, a review
``INVALID``; a memory's synthesis answer in its ``rejected`` list) with exactly the raw text
that was served.

    python benchmarks/drill_outputs.py [--tasks 2] [--steps 4] [--studies luck history playbook antipersist] [--keep]

The last line is the figure: broken replies served (by kind), rows recording one as invalid
with its raw text, rows recording one otherwise, served replies in no row, cells crashed.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

import pandas as pd

from drill_common import STUDY_CELLS, cell_config, cell_drill_arguments, drill_parser, loopback_registry

from memtrials.testing import LoopbackServer
from memtrials.testing.policies import BadOutputs

NOT_VALID_ANSWER = {"invalid", "recovered"}
NOT_VALID_STEP = {"unparsable", "inadmissible"}


def memory_rows(files: dict[str, Path]) -> list[tuple[str, str]]:
    """(status, raw) rows of a memory study's cells: every actor step (its parse status and raw
    reply), and every synthesis call (Reflector, Curator, ExpeL, AutoRefine, abstraction):
    ``REJECTED`` when the memory's ``rejected`` list holds its call id, else ``kept``."""
    import json

    from memtrials.memory.snapshot import read_snapshot

    rows: list[tuple[str, str]] = []
    for key, path in files.items():
        if key.endswith(".steps"):
            st = pd.read_parquet(path)
            rows += [(s, r) for s, r in zip(st.parse_status, st.raw_reply)]
    for key, path in files.items():
        if not (key.endswith(".record") or key.endswith(".memory")) or ".practice." in key:
            continue
        state = (json.loads(path.read_text())["memory"] if key.endswith(".record") else read_snapshot(path))["state"]
        rejected = {r["call_id"] for r in state.get("rejected", [])}
        calls = pd.read_parquet(files[key.rsplit(".", 1)[0] + ".calls"])
        calls = calls[~calls.purpose.astype(str).isin(["actor"]) & ~calls.purpose.astype(str).str.startswith("embed")]
        rows += [("REJECTED" if c in rejected else "kept", t) for c, t in zip(calls.call_id, calls.response_text)]
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = drill_parser(__doc__)
    cell_drill_arguments(ap, seed=0)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="memtrials-drill-outputs-"))
    policy = BadOutputs(args.seed)
    crashed: list[str] = []
    served: Counter[str] = Counter()
    recorded = otherwise = lost_total = 0
    problems: list[str] = []
    with LoopbackServer(policy=policy) as srv:
        models = loopback_registry(srv, tmp / "models.yaml", api_key_env=None,
                                   params={"temperature": 0.0, "max_tokens": 64, "seed": 0})
        cfg = cell_config(tmp, models, tasks_per_cell=args.tasks, max_actions=args.steps)
        texts: dict[str, list[str]] = {}
        for name in args.studies:
            start = len(policy.served)
            try:
                files = STUDY_CELLS[name](cfg, tmp / name)
            except Exception:  # noqa: BLE001 - a crash is what the drill counts
                crashed.append(name)
                print(f"{name}: CRASHED\n{traceback.format_exc()[-3000:]}")
                continue
            mine = policy.served[start:]
            served.update(k for k, _ in mine)
            pool: Counter[str] = Counter(t for _, t in mine)   # served raw texts, to match rows against
            rows: list[tuple[str, str]] = []                    # (status, raw) of every row a broken reply made
            if name == "luck":
                a = pd.read_parquet(files["answers"])
                rows += [(s, r) for s, r in zip(a.status, a.raw) if s != "not_scheduled"]
            elif name in ("playbook", "antipersist"):
                rows += memory_rows(files)
            else:
                for cond in ("raw", "experience"):
                    st = pd.read_parquet(files[f"{cond}.steps"])
                    rows += [(s, r) for s, r in zip(st.parse_status, st.raw_reply)]
                    calls = pd.read_parquet(files[f"{cond}.calls"])
                    reviews = st[st.review_call_id.notna()]
                    by_id = dict(zip(calls.call_id, calls.response_text))
                    rows += [("INVALID_REVIEW" if d == "INVALID" else str(d), by_id.get(c, ""))
                             for d, c in zip(reviews.review_decision, reviews.review_call_id)]
            ok_status = NOT_VALID_ANSWER if name == "luck" else NOT_VALID_STEP | {"INVALID_REVIEW", "REJECTED"}
            broken = set(pool)
            for status, raw in rows:
                raw = "" if raw is None else raw
                if raw not in broken:
                    continue  # a reply the server did not break (a free-text request)
                pool[raw] -= 1  # rows replayed from the cache carry a served reply once more
                if status in ok_status:
                    recorded += 1
                else:
                    otherwise += 1
                    problems.append(f"{name}: status {status} for the broken reply {raw[:80]!r}")
            lost = sum(max(0, n) for n in pool.values())
            if lost:
                problems.append(f"{name}: {lost} broken replies not found with their raw text in any row")
                lost_total += lost
            texts[name] = [t for _, t in mine]
            print(f"{name}: {len(mine)} broken replies served ({dict(Counter(k for k, _ in mine))}); "
                  f"{len(rows)} rows checked", flush=True)
    for p in problems[:20]:
        print("  " + p)
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    kinds = " ".join(f"{k}={served[k]}" for k in ("empty", "truncated", "non_json", "wrong_schema"))
    print(f"cells: luck (writers + readers, 4 worlds), history (raw + experience, {args.tasks} ScienceWorld tasks "
          f"x {args.steps} actions), playbook (ACE and Dynamic Cheatsheet growth + practice, 4 generated ALFWorld "
          f"games), antipersist (ExpeL, AutoRefine, abstraction, Reflexion: 2 rounds of 2 ScienceWorld tasks + "
          f"evaluation); of them: {', '.join(args.studies)}; {time.monotonic() - t0:.0f} s")
    print(f"outputs: served={sum(served.values())} ({kinds}) rows_invalid_with_raw={recorded} "
          f"rows_otherwise={otherwise} replies_not_recorded={lost_total} cells_crashed={len(crashed)}")
    return 0 if not crashed and not otherwise and not lost_total and recorded else 1


if __name__ == "__main__":
    sys.exit(main())
