"""Reliability drill: kill -9 the whole Snakemake run at random moments; nothing is paid twice.

The Lessons-from-Luck study at its default size and the history study at its default
design on one environment (ScienceWorld, the cheapest: an overlay sets
``history.envs: [scienceworld]``; every other study is switched off) run through
Snakemake in a workflow copy in a temporary folder, against the loopback endpoint (a
seeded choice per request, ``--latency`` seconds a reply) rather than the embedded model,
which on a shared 2-core machine makes one run take most of an hour.

1. An uninterrupted run (its own copy and cache, the same port: the URL is part of every
   cache key) gives the reference tables and the number of answered requests.
2. A second copy is started, and its whole process group is killed with SIGKILL at
   ``--kills`` seeded random moments, measured by progress: when the server has answered
   a number of requests drawn uniformly between 5 % and 95 % of the uninterrupted run's
   (sorted; a cached rerun moves fast through what was done, so a wall-clock delay would
   often outlast it).  After each kill ``snakemake --unlock`` and a rerun with no other flag
   follow (the copy's ``profiles/default`` has ``rerun-incomplete``); the last rerun goes to
   the end.

Counted at the loopback server (every answered request, by its body): **paid calls
repeated** is the number of requests answered again after a kill although their reply
had been stored in the cache before it (must be 0; the cache claims and first-stored-wins
in ``memtrials.llm.cache.sqlite`` make this hold).  Requests answered again whose reply was *not*
yet stored when the process died (in flight at the kill) are counted apart: they are the
at-most-in-flight loss the cache promises.  **Tables**: every Parquet file under
``results/luck`` and ``results/history`` equal to the uninterrupted run's, except the columns
``latency_s``, ``attempts``, ``errors``, ``started_at``, ``finished_at``; ``origin_cell`` (the
cell that made a call another cell replays: the first step of every history condition is
the same request, and which concurrent cell sends it first depends on scheduling, killed or
not) is counted apart.  ``--small`` keeps the history part to Raw and Experience rollouts,
Reference continuation and the probe.

    python benchmarks/drill_kill.py [--kills 5] [--seed 0] [--latency 0.05] [--small] [--keep]

The last line is the figure.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Mapping

import pandas as pd

from drill_common import env, loopback_overlay, snakemake, snakemake_args, workflow_copy

from memtrials.testing import Faults, LoopbackServer, make_policy

EXCLUDED = ("latency_s", "attempts", "errors", "started_at", "finished_at")
TARGETS = ["results/luck/tables/table1_panel.md", "results/luck/figures/figure1_p2_p3m.png",
           "results/history/tables/index.md"]
OFF = ("smoke", "playbook", "calibrator", "antipersist")


def request_key(messages: Any, seed: Any) -> str:
    """What identifies a request on both sides: its messages (canonical JSON) and seed."""
    text = json.dumps([messages, seed], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


class Counting:
    """A policy that counts, per request, the replies the server computed (one per answered
    request when no fault is injected)."""

    def __init__(self, spec: Any) -> None:
        self.inner = make_policy(spec)
        self.answered: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, body: Mapping[str, Any]) -> str:
        with self.lock:
            self.answered[request_key(body.get("messages"), body.get("seed"))] += 1
        return self.inner(body)

    def snapshot(self) -> Counter[str]:
        with self.lock:
            return Counter(self.answered)


def stored_keys(cache: Path) -> set[str]:
    if not cache.exists():
        return set()
    with sqlite3.connect(cache, timeout=30) as db:
        rows = db.execute("SELECT record FROM responses WHERE endpoint != ''").fetchall()
    out = set()
    for (rec,) in rows:
        r = json.loads(rec)
        if "messages" in r:
            out.add(request_key(json.loads(r["messages"]), r.get("seed")))
    return out


def tally(prev: Counter[str], now: Counter[str], stored: set[str]) -> tuple[int, int]:
    """Answers of one interval (since the last kill): (paid repeats, in-flight re-answers).
    A key answered before the kill and stored then must never be answered again; one
    answered before but not stored was in flight (one re-answer allowed); any further
    answer within the interval is a repeat too."""
    repeated = in_flight = 0
    for key, n in now.items():
        delta = n - prev.get(key, 0)
        if delta <= 0:
            continue
        if prev.get(key, 0) and key in stored:
            repeated += delta
        elif prev.get(key, 0):
            in_flight += 1
            repeated += delta - 1
        else:
            repeated += delta - 1
    return repeated, in_flight


SMALL = {"conditions": ["raw", "experience"], "chat_conditions": [],
         "continuation": {"conditions": ["reference"], "chat_conditions": []}}


def prepare(wf: Path, srv: LoopbackServer, small: bool = False) -> None:
    extra: dict[str, Any] = {"history": {"envs": ["scienceworld"], **(SMALL if small else {})},
                             **{study: {"enabled": False} for study in OFF}}
    loopback_overlay(srv, wf, extra=extra, api_key_env=None, max_concurrency=4,
                     params={"temperature": 0.0, "max_tokens": 64, "seed": 0})


def parquet_tables(wf: Path) -> dict[str, Path]:
    out = {}
    for study in ("luck", "history"):
        for p in sorted((wf / "results" / study).rglob("*.parquet")):
            out[str(p.relative_to(wf))] = p
    return out


def compare(a: Path, b: Path) -> list[str]:
    x, y = pd.read_parquet(a), pd.read_parquet(b)
    if list(x.columns) != list(y.columns) or len(x) != len(y):
        return [f"shape {x.shape} vs {y.shape}"]
    return [c for c in x.columns if c not in EXCLUDED
            and not x[c].reset_index(drop=True).equals(y[c].reset_index(drop=True))]


def run_args() -> list[str]:
    return ["--configfile", "overlay.yaml", "--", *TARGETS]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--latency", type=float, default=0.05, help="seconds the loopback endpoint takes a reply")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--small", action="store_true",
                    help="history: Raw and Experience rollouts, Reference continuation, the probe (not every condition)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]   # the same URL (part of every cache key) for both runs
    t0 = time.monotonic()

    ref_pol = Counting({"random": 7})
    with LoopbackServer(policy=ref_pol, faults=Faults(latency_s=args.latency), port=port) as srv:
        ref = workflow_copy(prefix="memtrials-drill-kill-ref-")
        prepare(ref, srv, args.small)
        out = snakemake(ref, *run_args(), cores=args.cores)
        if out.returncode != 0:
            print((out.stdout + out.stderr)[-4000:])
            print("kill: the uninterrupted run failed")
            return 2
    print(f"uninterrupted: {sum(ref_pol.answered.values())} answered requests, {time.monotonic() - t0:.0f} s",
          flush=True)

    n_ref = sum(ref_pol.answered.values())
    # the kill moments: seeded, by progress (answered requests at the server), in order
    moments = sorted(int(rng.uniform(0.05, 0.95) * n_ref) for _ in range(args.kills))
    pol = Counting({"random": 7})
    kills: list[tuple[int, int, int]] = []   # (moment, answered so far, stored so far)
    repeated = in_flight_repeats = 0
    with LoopbackServer(policy=pol, faults=Faults(latency_s=args.latency), port=port) as srv:
        wf = workflow_copy(prefix="memtrials-drill-kill-")
        prepare(wf, srv, args.small)
        cache = wf / "results" / "cache" / "llm.sqlite"
        stored_at_kill: set[str] = set()
        answered_at_kill: Counter[str] = Counter()
        for i in range(args.kills + 1):
            proc = subprocess.Popen(snakemake_args(*run_args(), cores=args.cores), cwd=wf, env=env(),
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
            if i == args.kills:
                rc = proc.wait()
                break
            threshold = moments[i]
            while proc.poll() is None and sum(pol.snapshot().values()) < threshold:
                time.sleep(0.05)
            if proc.poll() is not None:
                rc = proc.returncode
                print(f"run {i + 1} finished before its kill at {threshold} answered requests (rc {rc})", flush=True)
                break
            delay = threshold
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            time.sleep(1.0)   # replies in flight at the kill reach a dead socket
            now = pol.snapshot()
            r, f = tally(answered_at_kill, now, stored_at_kill)
            repeated, in_flight_repeats = repeated + r, in_flight_repeats + f
            stored_at_kill, answered_at_kill = stored_keys(cache), now
            kills.append((delay, sum(now.values()), len(stored_at_kill)))
            print(f"kill {len(kills)} at {delay} answered requests: {sum(now.values())} answered, "
                  f"{len(stored_at_kill)} stored",
                  flush=True)
            unlock = snakemake(wf, "--unlock", *run_args(), cores=1)
            if unlock.returncode != 0:
                print(unlock.stderr[-2000:])
        now = pol.snapshot()
        r, f = tally(answered_at_kill, now, stored_at_kill)
        repeated, in_flight_repeats = repeated + r, in_flight_repeats + f
        ok = rc == 0
        unmatched = len(set(now) - stored_keys(cache))   # answered but never stored: the key mapping's check
    print(f"killed run: {len(kills)} kills, final rerun rc {rc}; {sum(now.values())} answered requests "
          f"({len(now)} distinct) against {sum(ref_pol.answered.values())} uninterrupted; {unmatched} answered "
          f"requests not in the cache", flush=True)

    ref_tables, tables = parquet_tables(ref), parquet_tables(wf)
    same = differ = origin_only = 0
    for name, path in ref_tables.items():
        cols = compare(path, tables[name]) if name in tables else ["missing"]
        origin_only += cols == ["origin_cell"]
        cols = [c for c in cols if c != "origin_cell"]
        same += not cols
        differ += bool(cols)
        if cols:
            print(f"  {name}: differs in {cols}")
    differ += len(set(tables) - set(ref_tables))
    if not args.keep:
        shutil.rmtree(ref.parent, ignore_errors=True)
        shutil.rmtree(wf.parent, ignore_errors=True)
    print(f"loopback endpoint ({args.latency * 1000:.0f} ms a reply), not the embedded model; "
          f"tables compared without {', '.join(EXCLUDED)}; {time.monotonic() - t0:.0f} s in all")
    print(f"kill: kills={len(kills)} completed={int(ok)} paid_calls_repeated={repeated} "
          f"in_flight_reanswered={in_flight_repeats} tables_identical={same}/{same + differ} "
          f"origin_cell_differs={origin_only}")
    return 0 if ok and not repeated and not differ and same else 1


if __name__ == "__main__":
    sys.exit(main())
