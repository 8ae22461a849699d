"""Throughput and CPU per call of the model client against the ideal and a floor (issues 2, 14).

The loopback endpoint (its own process, as a real endpoint would be) answers every
request after a fixed 200 ms with no faults; the client sends N = 2,000 calls with 32 in
flight (endpoint max_concurrency 32) through the full path (cache lookups and writes,
ledger, records).  The ideal is 32 / 0.2 s = 160 calls/s.  In the same process, against
the same server, a bare asyncio HTTP client (httpx, 32 connections, no cache, no records)
sends the same requests: the floor, which shows what this machine allows at the moment.
Both are timed from their first request after one warm-up call (not counted): the floor's
session is opened before its clock starts, and MemTrials's first call opens its HTTP session
and imports the openai SDK (for its error types; about a second on this machine), a cost a
job pays once, printed on its own line.
Printed: CPU milliseconds per call of this process for both, MemTrials's throughput as a
ratio to the floor, and last, achieved / ideal (target >= 0.90).

    .venv/bin/python benchmarks/bench_llm_throughput.py [--n 2000] [--inflight 32] [--latency 0.2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import aiohttp
import httpx
import yaml

from memtrials.llm import open_client
from memtrials.testing import loopback_endpoint

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--inflight", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--floor", choices=("aiohttp", "httpx"), default="aiohttp",
                    help="the bare client of the floor (httpx's connection pool costs more CPU than the SDK's)")
    args = ap.parse_args()
    server = subprocess.Popen(
        [sys.executable, "-m", "memtrials.testing.serve", "--port", "0", "--faults", json.dumps({"latency_s": args.latency})],
        stdout=subprocess.PIPE, text=True)
    base_url = server.stdout.readline().split()[1]  # "BASE_URL http://127.0.0.1:PORT/v1"

    class Srv:  # what loopback_endpoint needs to know of the server
        model = "loopback-model"

    Srv.base_url = base_url
    with tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models.yaml"
        models.write_text(yaml.safe_dump({"endpoints": {"loop": loopback_endpoint(Srv, max_concurrency=args.inflight)}}))
        config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
        config.update(models_file=str(models), panel=["loop"], roles={},
                      cache={"path": str(Path(tmp) / "cache" / "llm.sqlite"), "mode": "use", "backend": "sqlite"})

        params = loopback_endpoint(Srv)["params"]

        async def floor() -> tuple[float, float]:
            """The same requests from a bare asyncio HTTP client: elapsed s, CPU s."""
            gate = asyncio.Semaphore(args.inflight)

            def body(i: int) -> dict:
                return {"model": Srv.model, "messages": [{"role": "user", "content": f"floor {i}"}], **params}

            def content(data: bytes) -> str:
                return json.loads(data)["choices"][0]["message"]["content"]

            if args.floor == "aiohttp":
                connector = aiohttp.TCPConnector(limit=args.inflight)
                async with aiohttp.ClientSession(base_url + "/", connector=connector) as http:
                    async def one(i: int) -> str:
                        async with gate, http.post("chat/completions", json=body(i)) as resp:
                            resp.raise_for_status()
                            return content(await resp.read())
                    await one(-1)  # warm-up, not counted
                    c0, t0 = time.process_time(), time.perf_counter()
                    await asyncio.gather(*(one(i) for i in range(args.n)))
                    return time.perf_counter() - t0, time.process_time() - c0
            limits = httpx.Limits(max_connections=args.inflight, max_keepalive_connections=args.inflight)
            async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=60.0) as http:
                async def one(i: int) -> str:
                    async with gate:
                        resp = await http.post("/chat/completions", json=body(i))
                        resp.raise_for_status()
                        return content(resp.content)
                await one(-1)  # warm-up, not counted
                c0, t0 = time.process_time(), time.perf_counter()
                await asyncio.gather(*(one(i) for i in range(args.n)))
                return time.perf_counter() - t0, time.process_time() - c0

        first: list[float] = []

        async def run() -> tuple[float, float]:
            """MemTrials's client: elapsed s, CPU s (this process: client, SQLite, records)."""
            async with open_client(config, "bench/throughput", Path(tmp) / "calls.parquet") as client:
                client.expect(args.n + 1)
                t0 = time.perf_counter()
                await client.complete("loop", [{"role": "user", "content": "warm-up"}])  # not counted
                first.append(time.perf_counter() - t0)
                c0, t0 = time.process_time(), time.perf_counter()
                await asyncio.gather(*(
                    client.complete("loop", [{"role": "user", "content": f"request {i}"}]) for i in range(args.n)))
                return time.perf_counter() - t0, time.process_time() - c0

        floor_s, floor_cpu = asyncio.run(floor())
        elapsed, cpu = asyncio.run(run())
        with urllib.request.urlopen(base_url.replace("/v1", "/_stats")) as resp:
            stats = json.load(resp)
        server.terminate()
        server.wait()
        assert stats["completions"] == 2 * (args.n + 1) and stats["max_in_flight"] <= args.inflight, stats
    achieved, floor_rate = args.n / elapsed, args.n / floor_s
    ideal = args.inflight / args.latency
    print(f"calls: {args.n}, in flight: {args.inflight}, server latency: {args.latency * 1000:.0f} ms")
    print(f"floor (bare {args.floor}): {floor_s:.2f} s, {floor_rate:.1f} calls/s, CPU {1000 * floor_cpu / args.n:.2f} ms/call")
    print(f"memtrials: first call {first[0]:.2f} s (session, SDK import; {args.latency:.2f} s of it the server), "
          f"not counted below")
    print(f"memtrials: {elapsed:.2f} s, {achieved:.1f} calls/s, CPU {1000 * cpu / args.n:.2f} ms/call; "
          f"ideal: {ideal:.1f} calls/s")
    print(f"throughput ratio (achieved / floor): {achieved / floor_rate:.3f}")
    print(f"throughput ratio (achieved / ideal): {achieved / ideal:.3f}")


if __name__ == "__main__":
    main()
