"""The embedded embedder: an OpenAI-compatible ``/v1/embeddings`` server on 127.0.0.1.

Embeddings go through the same model layer as completions: a cell whose embedder is an
embedded entry (``provider: embedded``, ``task: embed``) starts this server in a child
process on first need (:class:`EmbedderServer`, the lifecycle of
:class:`memtrials.llm.local.embedded.EmbeddedServer`: weights' SHA-256 checked, ``/health``
awaited, stopped when the cell ends, exits by itself if its parent dies), and the client
calls it over HTTP like any embedding endpoint.  The model is
:class:`memtrials.llm.local.sentence_encoder.SentenceEncoder` (numpy).

Routes: ``GET /health``, ``GET /v1/models``, ``POST /v1/embeddings`` (``input`` a string
or a list of strings; ``encoding_format`` ``float`` or ``base64``; ``dimensions`` only
equal to the model's).  Chat routes answer 404 with a message saying what this server
is.  Run by hand: ``python -m memtrials.llm.local.embedder serve --endpoint minilm``.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from memtrials.config import Endpoint
from memtrials.llm.local.embedded import EmbeddedServer, serve_until_interrupted
from memtrials.machine import add_watch_arguments, watch_in_thread

MAX_INPUTS = 2048
"""Most texts one request may carry."""


class EmbedderServer(EmbeddedServer):
    """The embedded embedder for one registry entry, in a child process."""

    def command(self, weights: list[Path], port: int) -> list[str]:
        w = self.endpoint.embedded
        assert w is not None
        return [
            sys.executable, "-m", "memtrials.llm.local.embedder",
            "--archive", *map(str, weights), "--port", str(port), "--alias", self.endpoint.model,
            *self.watch(),
        ]

    def child_env(self) -> dict[str, str]:
        w = self.endpoint.embedded
        assert w is not None
        threads = str(w.threads)
        # BLAS threads per request; requests in parallel come from the client's max_concurrency
        return dict(os.environ, OPENBLAS_NUM_THREADS=threads, OMP_NUM_THREADS=threads, MKL_NUM_THREADS=threads)


def server_for(endpoint: Endpoint, log_path: str | os.PathLike[str] | None = None) -> EmbeddedServer:
    """The local server of an embedded entry: llama.cpp for chat, the embedder for ``task: embed``."""
    return EmbedderServer(endpoint, log_path) if endpoint.task == "embed" else EmbeddedServer(endpoint, log_path)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_Server"
    # one send per reply, no Nagle: headers and body in separate segments would wait for
    # a delayed ACK (about 40 ms a request on keep-alive connections)
    disable_nagle_algorithm = True
    wbufsize = 1 << 16

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (quiet by default)
        return

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._send(status, {"error": {"message": message, "type": kind}})

    def do_GET(self) -> None:  # noqa: N802
        path = self.path.split("?")[0]
        if path == "/health":
            self._send(200, {"status": "ok"})
        elif path in ("/v1/models", "/models"):
            self._send(200, {"object": "list", "data": [
                {"id": self.server.alias, "object": "model", "owned_by": "memtrials-embedded"}]})
        else:
            self._error(404, f"no route GET {path}")

    def do_POST(self) -> None:  # noqa: N802
        path = self.path.split("?")[0]
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if path not in ("/v1/embeddings", "/embeddings"):
            self._error(404, f"no route POST {path}: this is the embedded embedder "
                             f"({self.server.alias}); it serves /v1/embeddings only")
            return
        try:
            req = json.loads(raw)
        except json.JSONDecodeError:
            self._error(400, "body is not JSON")
            return
        error = self._invalid(req)
        if error:
            self._error(*error)
            return
        texts = [req["input"]] if isinstance(req["input"], str) else list(req["input"])
        vectors, tokens = self.server.encode(texts)
        b64 = req.get("encoding_format") == "base64"
        data = [{"object": "embedding", "index": i,
                 "embedding": base64.b64encode(v.astype("<f4").tobytes()).decode() if b64 else v.tolist()}
                for i, v in enumerate(vectors)]
        used = int(sum(tokens))
        self._send(200, {"object": "list", "data": data, "model": self.server.alias,
                         "usage": {"prompt_tokens": used, "total_tokens": used}})

    def _invalid(self, req: Any) -> tuple[int, str] | None:
        alias, dim = self.server.alias, self.server.dimension
        if not isinstance(req, dict):
            return 400, "body must be a JSON object"
        if req.get("model") != alias:
            return 404, f"model {req.get('model')!r} not found (this server serves {alias!r})"
        inp = req.get("input")
        if isinstance(inp, str):
            inp = [inp]
        if not isinstance(inp, list) or not inp or not all(isinstance(t, str) for t in inp):
            return 400, "input must be a non-empty string or list of strings"
        if len(inp) > MAX_INPUTS:
            return 400, f"at most {MAX_INPUTS} inputs per request, got {len(inp)}"
        if req.get("dimensions") not in (None, dim):
            return 400, f"{alias} produces {dim}-dimensional vectors; dimensions={req['dimensions']} is not supported"
        if req.get("encoding_format") not in (None, "float", "base64"):
            return 400, "encoding_format must be float or base64"
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, alias: str, archive: list[str]) -> None:
        from memtrials.llm.local.sentence_encoder import SentenceEncoder

        self.alias = alias
        if len(archive) == 1:
            self.model = SentenceEncoder(archive[0])
        else:  # a zip split over several packages: joined in memory, in order
            self.model = SentenceEncoder(io.BytesIO(b"".join(Path(p).read_bytes() for p in archive)))
        self.dimension = self.model.dimension
        super().__init__(("127.0.0.1", port), _Handler)

    def encode(self, texts: list[str]) -> tuple[Any, list[int]]:
        return self.model.encode(texts)


def serve(argv: list[str]) -> None:
    """``serve --endpoint NAME``: serve an embedded embedder of the registry until Ctrl-C."""
    from memtrials.config import load_models

    parser = argparse.ArgumentParser(prog="python -m memtrials.llm.local.embedder serve")
    parser.add_argument("--endpoint", default="minilm")
    parser.add_argument("--models", default="config/models.yaml")
    args = parser.parse_args(argv)
    models = load_models(args.models)
    if args.endpoint not in models or models[args.endpoint].task != "embed" or models[args.endpoint].provider != "embedded":
        embedders = [n for n, e in models.items() if e.task == "embed" and e.provider == "embedded"]
        sys.exit(f"{args.models}: no embedded embedder '{args.endpoint}' (embedded embedders: {', '.join(embedders)})")
    with EmbedderServer(models[args.endpoint]) as srv:
        serve_until_interrupted(srv, args.endpoint)


def main(argv: list[str] | None = None) -> None:
    """Child entry point: serve until SIGTERM, or until the parent process is gone."""
    import signal

    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        serve(argv[1:])
        return
    parser = argparse.ArgumentParser(prog="python -m memtrials.llm.local.embedder")
    parser.add_argument("--archive", nargs="+", required=True, help="the model zip, or its parts in order")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--alias", required=True)
    add_watch_arguments(parser)
    args = parser.parse_args(argv)
    t0 = time.monotonic()
    server = _Server(args.port, args.alias, args.archive)
    print(f"embedder {args.alias}: {server.dimension} dimensions, loaded in {time.monotonic() - t0:.2f} s, "
          f"serving on 127.0.0.1:{args.port}", flush=True)

    # parent gone (a per-cell server) or no lease left (a shared one): do not outlive them
    watch_in_thread(args, lambda: os._exit(0))
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve_forever(poll_interval=0.5)
    os._exit(0)


if __name__ == "__main__":
    main()
