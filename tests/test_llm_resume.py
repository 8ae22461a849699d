"""A cell killed with SIGKILL and rerun repeats no completed call; records match a clean run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from memtrials.testing import Faults

N = 200
CALLER = """
import asyncio, json, sys
from memtrials.llm import open_client
cfg = json.load(open(sys.argv[1]))
async def main():
    async with open_client(cfg, "resume/cell", sys.argv[2]) as client:
        client.expect({n})
        await asyncio.gather(*(client.complete("loop", [{{"role": "user", "content": f"task {{i}}"}}], sample=i % 3)
                               for i in range({n})))
asyncio.run(main())
""".format(n=N)

TIMING = ["latency_s", "started_at", "finished_at"]


def _run(cfg: dict, tmp: Path, name: str, kill_after: int | None = None, srv=None) -> subprocess.CompletedProcess | None:
    cfg_path = tmp / f"{name}.json"
    cfg_path.write_text(json.dumps(cfg))
    script = tmp / "caller.py"
    script.write_text(CALLER)
    cmd = [sys.executable, str(script), str(cfg_path), str(tmp / f"{name}.parquet")]
    if kill_after is None:
        return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=120)
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while srv.stats.completions < kill_after and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    return None


def test_kill_9_and_resume(loopback, make_config, tmp_path):
    srv = loopback(policy={"random": 5}, faults=Faults(latency_s=0.02))
    cfg = make_config(srv, max_concurrency=4, cache_dir=tmp_path / "killed", price=(1.0, 3.0))
    _run(cfg, tmp_path, "run", kill_after=N // 2, srv=srv)
    first = srv.stats.completions
    assert N // 4 < first < N, first
    assert not (tmp_path / "run.parquet").exists()  # killed before writing its output

    from memtrials.llm.cache.sqlite import Cache

    cache = Cache(cfg["cache"]["path"])
    committed = len(cache.records())
    cache.close()
    assert first - 4 <= committed <= first  # only calls in flight at the kill were lost

    srv.reset_stats()
    _run(cfg, tmp_path, "run")
    assert srv.stats.completions == N - committed  # only the missing calls, counted at the server
    resumed = pq.read_table(tmp_path / "run.parquet")

    # an uninterrupted run against a fresh cache gives the same records (timing aside)
    clean_cfg = make_config(srv, max_concurrency=4, cache_dir=tmp_path / "clean", price=(1.0, 3.0))
    _run(clean_cfg, tmp_path, "clean")
    clean = pq.read_table(tmp_path / "clean.parquet")
    assert resumed.num_rows == N
    assert resumed.drop(TIMING).equals(clean.drop(TIMING))

    # cost totals survive the kill with no double counting: every completed call is in
    # the ledger once (a reply lost in flight at the kill was never received, so it is not)
    cache = Cache(cfg["cache"]["path"])
    assert sum(row[1] for row in cache.totals()) == N
    assert abs(cache.spent() - sum(resumed.column("cost").to_pylist())) < 1e-12
    cache.close()

    # a rerun replays the cache and reproduces the records byte for byte
    srv.reset_stats()
    before = (tmp_path / "run.parquet").read_bytes()
    _run(cfg, tmp_path, "run")
    assert srv.stats.requests == 0
    assert (tmp_path / "run.parquet").read_bytes() == before
