"""Reliability drill: a fault storm changes nothing but timings and attempt counts.

A real luck cell (worlds, freeze, writers, readers), real history rollout cells on
ScienceWorld (Raw and Experience), the playbook study's ACE and Dynamic Cheatsheet growth and
practice cells (generated ALFWorld games) and anti-persistence training streams with their
evaluation (ExpeL, AutoRefine, abstraction, Reflexion; ScienceWorld) run twice through the
functions their rules call (``--studies`` picks some), each
time in a fresh temporary folder with its own cache: once against a fault-free loopback
endpoint, once against one injecting 429 / 500 / 503 / dropped connections / timeouts /
malformed and truncated bodies on 20 % of requests in total
(``Faults.uniform(0.20, ...)``).  Both endpoints answer with the same deterministic
policy (a seeded choice per request), so the two runs must agree.

Checked on the storm run:

- every cell completes;
- records lost: answered requests (the server's count of 200 replies it sent in full) that
  are missing from the spending ledger, or whose call id is in no records file and no
  journal line (must be 0);
- duplicates: call ids repeated within a records file or a journal, ledger rows that pay
  one call twice, cache entries per key above one (must be 0);
- tables: every Parquet output equal to the fault-free run's, except the columns
  ``latency_s``, ``attempts``, ``errors``, ``started_at``, ``finished_at`` (timing and the
  retries themselves).

    python benchmarks/drill_faults.py [--rate 0.20] [--tasks 2] [--steps 4] [--studies ...] [--keep]

The last line is the figure.
"""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

import pandas as pd

from drill_common import STUDIES, STUDY_CELLS, cell_config, cell_drill_arguments, drill_parser, loopback_registry

from memtrials.testing import Faults, LoopbackServer

EXCLUDED = ("latency_s", "attempts", "errors", "started_at", "finished_at")
POLICY = {"random": 7}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]



def run_once(tmp: Path, port: int, faults: Faults | None, tasks: int, steps: int, timeout_s: float,
             studies: tuple[str, ...] = STUDIES) -> dict:
    """The studies' cells into ``tmp``; returns the server's counters and any crash.  Both
    runs use the same port: the endpoint's URL is part of every cache key and call id."""
    crashed: list[str] = []
    files: dict[str, Path] = {}
    tmp.mkdir(parents=True, exist_ok=True)
    with LoopbackServer(policy=POLICY, faults=faults, port=port) as srv:
        models = loopback_registry(srv, tmp / "models.yaml", api_key_env=None, max_concurrency=4,
                                   params={"temperature": 0.0, "max_tokens": 64, "seed": 0})
        cfg = cell_config(tmp, models, tasks_per_cell=tasks, max_actions=steps, timeout_s=timeout_s,
                          max_retries=10)
        for name in studies:
            try:
                files.update({f"{name}/{k}": v for k, v in STUDY_CELLS[name](cfg, tmp / name).items()})
            except Exception:  # noqa: BLE001 - a crash is what the drill counts
                crashed.append(name)
                print(f"{name}: CRASHED\n{traceback.format_exc()[-3000:]}", flush=True)
        stats = srv.stats
    return {"files": files, "crashed": crashed, "completions": stats.completions, "requests": stats.requests,
            "faults": dict(stats.faults), "cache": Path(cfg["cache"]["path"]), "records": tmp / "results" / "records"}


def ledger_and_cache(cache: Path) -> tuple[list[str], int, int]:
    with sqlite3.connect(cache) as db:
        ledger = [r for (r,) in db.execute("SELECT call_id FROM ledger")]
        entries = db.execute("SELECT COUNT(*) FROM responses").fetchone()[0]
        keys = db.execute("SELECT COUNT(DISTINCT key) FROM responses").fetchone()[0]
    return ledger, entries, keys


def journal_ids(folder: Path) -> tuple[set[str], int]:
    """Call ids in the journals, and how many journal lines repeat an id within one journal."""
    ids: set[str] = set()
    repeats = 0
    for path in sorted(folder.glob("*.jsonl")):
        seen = Counter(json.loads(line)["call_id"] for line in path.read_text().splitlines() if line.strip())
        repeats += sum(n - 1 for n in seen.values())
        ids |= set(seen)
    return ids, repeats


def compare(a: Path, b: Path) -> tuple[bool, list[str]]:
    """Same table outside the excluded columns?  (equal, columns that differ).  A JSON output (a
    playbook record, a memory snapshot): the same document outside the excluded keys (top-level
    keys that differ)."""
    if a.suffix == ".json":
        def strip(x: object) -> object:
            if isinstance(x, dict):
                return {k: strip(v) for k, v in x.items() if k not in EXCLUDED}
            return [strip(v) for v in x] if isinstance(x, list) else x

        x, y = (strip(json.loads(path.read_text())) for path in (a, b))
        diff = sorted(k for k in set(x) | set(y) if x.get(k) != y.get(k))  # type: ignore[union-attr]
        return not diff, diff
    x, y = pd.read_parquet(a), pd.read_parquet(b)
    if list(x.columns) != list(y.columns) or len(x) != len(y):
        return False, [f"shape {x.shape} vs {y.shape}"]
    cols = [c for c in x.columns if c not in EXCLUDED]
    diff = [c for c in cols if not x[c].reset_index(drop=True).equals(y[c].reset_index(drop=True))]
    return not diff, diff


def main(argv: list[str] | None = None) -> int:
    ap = drill_parser(__doc__)
    ap.add_argument("--rate", type=float, default=0.20, help="share of requests that fail, over all fault kinds")
    cell_drill_arguments(ap, seed=1)
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="memtrials-drill-faults-"))
    port = free_port()
    studies = tuple(args.studies)
    clean = run_once(root / "clean", port, None, args.tasks, args.steps, timeout_s=10.0, studies=studies)
    t1 = time.monotonic()
    # a timeout fault holds the reply 4 s; the client gives up after 3 s and retries
    storm_faults = Faults.uniform(args.rate, seed=args.seed, timeout_delay_s=4.0, retry_after_s=0.05)
    storm = run_once(root / "storm", port, storm_faults, args.tasks, args.steps, timeout_s=3.0, studies=studies)
    t2 = time.monotonic()

    ledger, entries, keys = ledger_and_cache(storm["cache"])
    jids, journal_repeats = journal_ids(storm["records"])
    rec_ids: set[str] = set()
    record_repeats = 0
    for name, path in storm["files"].items():
        if name.endswith(".calls"):
            ids = list(pd.read_parquet(path, columns=["call_id"]).call_id)
            record_repeats += len(ids) - len(set(ids))
            rec_ids |= set(ids)
    paid = set(ledger)
    lost = max(0, storm["completions"] - len(paid)) + len(paid - (rec_ids | jids))
    duplicates = record_repeats + journal_repeats + (len(ledger) - len(paid)) + (entries - keys)
    same = differ = 0
    for name, path in sorted(clean["files"].items()):
        other = storm["files"].get(name)
        if other is None:
            differ += 1
            print(f"  {name}: missing in the storm run")
            continue
        equal, cols = compare(path, other)
        same += equal
        differ += not equal
        if not equal:
            print(f"  {name}: differs in {cols}")
    injected = sum(storm["faults"].values())
    print(f"fault-free run: {clean['requests']} requests, {t1 - t0:.0f} s; storm: {storm['requests']} requests, "
          f"{injected} faults injected ({injected / max(1, storm['requests']):.0%}: "
          f"{', '.join(f'{k[5:]} {v}' for k, v in sorted(storm['faults'].items()))}), {t2 - t1:.0f} s")
    print(f"storm: {storm['completions']} answered, {len(paid)} paid calls in the ledger, "
          f"{len(rec_ids)} call ids in records, {len(jids)} in journals; tables compared without {', '.join(EXCLUDED)}")
    if not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    crashed = len(clean["crashed"]) + len(storm["crashed"])
    print(f"faults: rate={args.rate:.2f} injected={injected} cells_crashed={crashed} records_lost={lost} "
          f"duplicates={duplicates} tables_identical={same}/{same + differ}")
    return 0 if not crashed and not lost and not duplicates and not differ and same else 1


if __name__ == "__main__":
    sys.exit(main())
