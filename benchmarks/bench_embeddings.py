"""Throughput of the embedded embedder (the numbers the README states) and of the cache hit path.

Figures, not a timed test:
- load: the embedder server's start (weights hashed, archive read, model built, /health)
  as the first call's wait, and the model's load in this process;
- model: texts/s of :class:`memtrials.llm.local.sentence_encoder.SentenceEncoder` in this
  process, per batch size and BLAS thread count (the ideal for the served path);
- served: texts/s through the model layer (``Client.embed`` -> HTTP -> the embedder
  server), cache off, per request batch size, and its ratio to the in-process model;
- cache hits: texts/s of ``Client.embed`` when every text is cached (a second client over
  the same cache), and the same against the loopback endpoint's fresh path.

    .venv/bin/python benchmarks/bench_embeddings.py [--endpoint minilm|mpnet] [--n 256] [--batch-sizes 1,8,32,64]

Texts are short lesson-like sentences (about 20 tokens).  On a shared 2-core machine the
figures move with the load: run it on an idle machine and read the ratios.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import dataclasses
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from memtrials.llm import open_client

REPO = Path(__file__).resolve().parents[1]
SUBJ = ["the agent", "a careful player", "the actor", "our robot", "a new user", "the model"]
VERB = ["should check", "must open", "often forgets", "can examine", "will take", "needs to clean"]
OBJ = ["the fridge before cooking", "every drawer in the kitchen", "the thermometer twice",
       "the receipt in the inbox", "the key on the table", "the apple with the sink"]
TAIL = ["before acting.", "after a failed attempt.", "when the task mentions heat.", "to avoid loops.",
        "if the goal is unclear.", "and then report success."]


def corpus(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(SUBJ)} {rng.choice(VERB)} {rng.choice(OBJ)} {rng.choice(TAIL)} (#{i})" for i in range(n)]


def in_process(endpoint: str, n: int, batch_sizes: list[int], threads: int) -> dict[int, float]:
    """Run the model in a fresh process with ``threads`` BLAS threads (set before numpy loads)."""
    code = f"""
import time, sys
sys.path.insert(0, {str(REPO / 'benchmarks')!r})
from bench_embeddings import corpus
from memtrials.config import load_models
import io
from memtrials.llm.local.embedded import weights_paths
from memtrials.llm.local.sentence_encoder import SentenceEncoder
t0 = time.monotonic()
paths = weights_paths(load_models({str(REPO / 'config/models.yaml')!r})[{endpoint!r}].embedded)
enc = SentenceEncoder(paths[0] if len(paths) == 1 else io.BytesIO(b"".join(p.read_bytes() for p in paths)))
print(f"  model load in-process: {{time.monotonic() - t0:.2f}} s (hash checked, archive read, model built)")
texts = corpus({n}); enc.encode(texts[:8]); rates = {{}}
for bs in {batch_sizes}:
    m = min({n}, 64) if bs == 1 else {n}
    t0, c0 = time.monotonic(), time.process_time()
    for i in range(0, m, bs):
        enc.encode(texts[i:i + bs])
    wall, cpu = time.monotonic() - t0, time.process_time() - c0
    rates[bs] = m / wall
    print(f"  model, {threads} thread(s), batch {{bs:>3}}: {{m / wall:7.1f}} texts/s ({{m / cpu:6.1f}} per CPU-second)")
print("RATES", json.dumps(rates))
"""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    out = subprocess.run([sys.executable, "-c", "import json\n" + code], env=env, check=True,
                         capture_output=True, text=True).stdout
    print("".join(line + "\n" for line in out.splitlines() if not line.startswith("RATES")), end="", flush=True)
    rates = json.loads(next(line for line in out.splitlines() if line.startswith("RATES"))[6:])
    return {int(k): v for k, v in rates.items()}


async def served(config: dict, endpoint: str, n: int, batch_sizes: list[int], one_thread: dict[int, float]) -> None:
    """Served texts/s; ideal = the 1-thread in-process rate x the requests that can run at once
    (the server runs one BLAS thread per request, up to max_concurrency, at most one per core)."""
    texts = corpus(n, seed=1)
    async with open_client(config, "bench/embeddings") as client:
        t0 = time.monotonic()
        await client.embed(endpoint, ["warm-up"])
        print(f"  server start + first call: {time.monotonic() - t0:.2f} s")
        ep = client.endpoints[endpoint]
        for bs in batch_sizes:
            client.endpoints[endpoint] = dataclasses.replace(ep, batch_size=bs)
            m = min(n, 64) if bs == 1 else n
            t0 = time.monotonic()
            await client.embed(endpoint, [f"{t} [{bs}]" for t in texts[:m]])
            wall = time.monotonic() - t0
            parallel = min(ep.max_concurrency, os.cpu_count() or 1, -(-m // bs))
            ideal = one_thread.get(bs, 0.0) * parallel
            ratio = f"{(m / wall) / ideal:5.2f} of the ideal {ideal:6.1f}" if ideal else "no ideal measured"
            print(f"  served, batch {bs:>3} (max_concurrency {ep.max_concurrency}): {m / wall:7.1f} texts/s, {ratio}")


async def cache_hits(config: dict, n: int) -> None:
    from memtrials.testing import LoopbackServer, loopback_embed_endpoint

    texts = corpus(n, seed=2)
    with LoopbackServer(embed_dim=384) as srv, tempfile.TemporaryDirectory() as tmp:
        models = Path(tmp) / "models.yaml"
        reg = yaml.safe_load((REPO / "config/models.yaml").read_text())
        reg["endpoints"]["loop"] = loopback_embed_endpoint(srv, batch_size=64, max_concurrency=4)
        models.write_text(yaml.safe_dump(reg))
        cfg = {**config, "models_file": str(models), "cache": {"path": str(Path(tmp) / "c.sqlite"), "mode": "use", "backend": "sqlite"}}
        async with open_client(cfg, "bench/fill") as client:
            t0 = time.monotonic()
            await client.embed("loop", texts)
            fresh = time.monotonic() - t0
        async with open_client(cfg, "bench/hits") as client:
            t0 = time.monotonic()
            r = await client.embed("loop", texts)
            hit = time.monotonic() - t0
        assert all(r.cached) and srv.stats.embedded_texts == n
        print(f"  loopback fresh (384 dimensions, batch 64): {n / fresh:9.0f} texts/s")
        print(f"  cache hits (every text cached):            {n / hit:9.0f} texts/s "
              f"({hit / n * 1e6:.0f} us a text; {fresh / hit:.1f}x the loopback's fresh path)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--endpoint", default="minilm", help="an embedded embedder of config/models.yaml (minilm, mpnet)")
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--batch-sizes", default="1,8,32,64")
    ap.add_argument("--threads", default="1,2", help="BLAS thread counts for the in-process figures")
    args = ap.parse_args()
    sizes = [int(x) for x in args.batch_sizes.split(",")]
    config = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    config["models_file"] = str(REPO / config["models_file"])
    print(f"embedded embedder: {args.endpoint}, {args.n} lesson-like texts, {os.cpu_count()} CPUs, "
          f"load average {os.getloadavg()[0]:.1f}")
    rates = {threads: in_process(args.endpoint, args.n, sizes, threads) for threads in [int(x) for x in args.threads.split(",")]}
    with tempfile.TemporaryDirectory() as tmp:
        cfg = copy.deepcopy(config)
        cfg["cache"] = {"path": str(Path(tmp) / "c.sqlite"), "mode": "off", "backend": "sqlite"}
        asyncio.run(served(cfg, args.endpoint, args.n, sizes, rates.get(1, {})))
        print("cache:")
        asyncio.run(cache_hits(cfg, max(args.n, 1000)))


if __name__ == "__main__":
    main()
