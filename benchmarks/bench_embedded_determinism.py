"""Does the embedded model give the same greedy reply to the same request every time?

Two fresh runs of the default pipeline do not produce the same records: the same request
(same body, temperature 0, seed 0) can get another reply.  This benchmark finds under which
serving conditions.  It takes up to ``--n`` distinct requests that a run recorded for the
endpoint (its ``*.calls.parquet`` files: messages and the exact parameters, grammar or schema
included), starts the embedded server as the pipeline does, and sends every request in
five passes:

- ``A``  one at a time, in order, on a fresh server (the reference);
- ``A2`` one at a time, in order again, same server (every prompt now in the prefix cache);
- ``B``  one at a time, in reverse order (another prefix-cache state at each request);
- ``C``  ``--in-flight`` at a time (default: the endpoint's ``max_concurrency``, its slots),
  a seeded shuffle, so requests share the server's batches with other requests;
- ``F``  one at a time, in order, on a second fresh server.

It prints, per pass, how many replies differ from ``A`` and how many differ from the reply the
run recorded; the last line is the share of requests whose reply differs in any pass.

    .venv/bin/python benchmarks/bench_embedded_determinism.py --calls 'results/**/*.calls.parquet' [--n 40]
        [--in-flight K] [--extra '{"cache_prompt": false}']
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import sys
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

from memtrials.config import load_models
from memtrials.llm.local.embedded import EmbeddedServer

REPO = Path(__file__).resolve().parents[1]


def load_requests(pattern: str, endpoint: str, n: int) -> pd.DataFrame:
    """Up to ``n`` distinct recorded requests of ``endpoint`` (by request digest and sample), a
    deterministic spread over the files: sorted by digest, every k-th."""
    frames = []
    for path in sorted(glob.glob(pattern, recursive=True)):
        df = pd.read_parquet(path, columns=["endpoint", "request_digest", "sample", "messages", "params",
                                            "response_text"])
        frames.append(df[df["endpoint"] == endpoint])
    if not frames:
        sys.exit(f"no calls files match {pattern!r}")
    calls = pd.concat(frames).dropna(subset=["response_text"]).drop_duplicates(["request_digest", "sample"])
    calls = calls.sort_values(["request_digest", "sample"]).reset_index(drop=True)
    if calls.empty:
        sys.exit(f"no recorded calls of endpoint {endpoint!r} in {pattern!r}")
    step = max(1, len(calls) // n)
    return calls.iloc[::step].head(n).reset_index(drop=True)


def ask(base_url: str, model: str, messages: str, params: str, extra: dict) -> str:
    body = {"model": model, "messages": json.loads(messages), **json.loads(params), **extra}
    req = urllib.request.Request(f"{base_url}/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as resp:
        return json.load(resp)["choices"][0]["message"]["content"] or ""


def run_pass(srv: EmbeddedServer, model: str, reqs: pd.DataFrame, order: list[int], in_flight: int,
             extra: dict) -> list[str]:
    out = [""] * len(reqs)

    def one(i: int) -> None:
        out[i] = ask(srv.base_url, model, reqs["messages"][i], reqs["params"][i], extra)

    with ThreadPoolExecutor(in_flight) as pool:
        list(pool.map(one, order))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", required=True, help="glob of a run's *.calls.parquet files (recursive **)")
    ap.add_argument("--endpoint", default="smollm2")
    ap.add_argument("--models", default=str(REPO / "config" / "models.yaml"))
    ap.add_argument("--n", type=int, default=40)
    ap.add_argument("--in-flight", type=int, default=None)
    ap.add_argument("--extra", default="{}", help='JSON added to every request body, e.g. \'{"cache_prompt": false}\' '
                    "(llama.cpp: no prefix reuse; an endpoint's extra_body can set it)")
    args = ap.parse_args()
    extra = json.loads(args.extra)
    ep = load_models(args.models)[args.endpoint]
    reqs = load_requests(args.calls, args.endpoint, args.n)
    in_flight = args.in_flight or ep.max_concurrency
    n = len(reqs)
    print(f"{n} distinct recorded requests of {args.endpoint}; server slots {ep.max_concurrency}; "
          f"pass C with {in_flight} in flight; added to every body: {json.dumps(extra)}", flush=True)
    passes: dict[str, list[str]] = {}
    shuffled = list(range(n))
    random.Random(0).shuffle(shuffled)
    with EmbeddedServer(ep) as srv:
        for name, order, k in (("A", list(range(n)), 1), ("A2", list(range(n)), 1),
                               ("B", list(reversed(range(n))), 1), ("C", shuffled, in_flight)):
            t = time.monotonic()
            passes[name] = run_pass(srv, ep.model, reqs, order, k, extra)
            print(f"pass {name}: {time.monotonic() - t:.0f} s", flush=True)
    with EmbeddedServer(ep) as srv:
        t = time.monotonic()
        passes["F"] = run_pass(srv, ep.model, reqs, list(range(n)), 1, extra)
        print(f"pass F: {time.monotonic() - t:.0f} s", flush=True)
    recorded = list(reqs["response_text"])
    print(f"{'pass':<5} {'differs from A':>15} {'differs from the record':>24}")
    for name, replies in passes.items():
        vs_a = sum(r != a for r, a in zip(replies, passes["A"]))
        vs_rec = sum(r != c for r, c in zip(replies, recorded))
        print(f"{name:<5} {vs_a:>9} of {n:<3} {vs_rec:>18} of {n:<3}")
    unstable = sum(len({p[i] for p in passes.values()}) > 1 for i in range(n))
    print(f"requests with another reply in some pass: {unstable} of {n} ({100 * unstable / n:.0f} %)")


if __name__ == "__main__":
    main()
