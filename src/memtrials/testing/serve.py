"""Run the loopback endpoint from the command line.

    python -m memtrials.testing.serve --policy first_admissible --port 0 \
        --faults '{"rate_429": 0.05, "latency_s": 0.2}'

Prints ``BASE_URL <url>`` once listening, then serves until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading

from memtrials.testing.server import Faults, LoopbackServer


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m memtrials.testing.serve")
    parser.add_argument("--policy", default="first_admissible",
                        help="first_admissible | first_enum | echo | random, or JSON such as "
                             '\'{"script": ["a", "b"]}\' or \'{"random": 7}\'')
    parser.add_argument("--faults", default="{}", help="JSON object of Faults fields")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--model", default="loopback-model")
    parser.add_argument("--embed-dim", type=int, default=16, help="dimensions of /v1/embeddings vectors")
    parser.add_argument("--no-embeddings", action="store_true", help="serve chat only: /v1/embeddings answers 404")
    parser.add_argument("--prefix-cache", type=int, default=0,
                        help="report cached_tokens as a provider's prefix cache over the last N prompts would (0: off)")
    args = parser.parse_args(argv)
    policy = json.loads(args.policy) if args.policy.startswith("{") else args.policy
    try:
        faults = Faults(**json.loads(args.faults))
    except TypeError as exc:
        parser.error(f"--faults: {exc}")
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with LoopbackServer(policy=policy, faults=faults, model=args.model, port=args.port,
                        embeddings=not args.no_embeddings, embed_dim=args.embed_dim,
                        prefix_cache=args.prefix_cache) as srv:
        print(f"BASE_URL {srv.base_url}", flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
