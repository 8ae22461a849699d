"""One embedded server per endpoint and machine, shared by the concurrent cells of a run.

Without sharing, every cell that needs the embedded chat model (or embedder) starts its
own server, so two cells running at once on a 2-core machine load the weights twice and
compete with two thread pools.  With ``servers.shared`` the first cell that needs an
endpoint starts its server; later cells find it and use it; the server stops itself once
no cell has used it for ``servers.idle_s`` seconds, and the workflow stops every shared
server when the run ends (``onsuccess`` / ``onerror`` call :func:`stop_all`).

The bookkeeping lives in one folder per machine (``<cache folder>/servers/``; file names
carry the host name, so a folder on a shared filesystem holds each host's servers apart):

- ``<endpoint>-<weights sha>-<host>.json``: the running server (pid, port, base URL);
- ``… .lock``: an ``fcntl`` lock held while a cell looks up or starts the server, and
  while the server decides to stop (so a cell never joins a server that is leaving);
- ``… .leases/<pid>-<id>``: one file per client that holds the server; a lease whose
  process is gone (a killed cell) is dropped by the server's watchdog.

The server process is started in its own session, so it outlives the cell that started
it and a kill of that cell's process group; its watchdog (:func:`watch_leases`, run in
the server child) ends it when the leases are gone.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import uuid
from pathlib import Path

from memtrials.config import Endpoint
from memtrials.io import atomic_write_text
from memtrials.machine import server_dir  # noqa: F401  (re-exported: the workflow and the client use it from here)
from memtrials.llm.local.embedded import server_healthy
from memtrials.llm.local.embedder import server_for
from memtrials.machine import alive, locked, read_info, release_run


def _stem(ep: Endpoint) -> str:
    if ep.embedded is not None and ep.embedded.checkpoint:
        sha = ep.checkpoint_digest()[:12]  # a retrained checkpoint gets its own server
    else:
        sha = ep.embedded.sha256[:12] if ep.embedded is not None else "remote"
    return f"{ep.name}-{sha}-{socket.gethostname()}"


class SharedServer:
    """A lease on the machine's shared server for one embedded endpoint.

    ``start()`` returns the server's OpenAI base URL (starting the server if no live one
    is registered); ``stop()`` gives the lease back (the server itself stops when idle).
    Same interface as :class:`memtrials.llm.local.embedded.EmbeddedServer`, so the client
    treats both alike.
    """

    def __init__(self, endpoint: Endpoint, folder: str | os.PathLike[str], idle_s: float,
                 log_path: str | os.PathLike[str] | None = None) -> None:
        self.endpoint = endpoint
        self.folder = Path(folder)
        self.idle_s = float(idle_s)
        stem = _stem(endpoint)
        self.info = self.folder / f"{stem}.json"
        self.lock = self.folder / f"{stem}.lock"
        self.leases = self.folder / f"{stem}.leases"
        self.log_path = Path(log_path) if log_path else self.folder / f"{stem}.log"
        self.lease: Path | None = None
        self.base_url: str | None = None
        self.started = False  # whether this lease started the server

    def start(self, timeout: float = 180.0) -> str:
        self.leases.mkdir(parents=True, exist_ok=True)
        with locked(self.lock):
            info = read_info(self.info)
            if not (info and alive(int(info["pid"])) and server_healthy(info["base_url"][: -len("/v1")])):
                srv = server_for(self.endpoint, self.log_path)
                srv.watch_args = ["--leases", str(self.leases), "--lock", str(self.lock), "--info", str(self.info),
                                  "--idle", str(self.idle_s)]
                srv.detach = True
                base_url = srv.start(timeout)
                assert srv.proc is not None
                info = {"pid": srv.proc.pid, "base_url": base_url, "endpoint": self.endpoint.name,
                        "host": socket.gethostname(), "started_at": time.time()}
                atomic_write_text(self.info, json.dumps(info, sort_keys=True))
                self.started = True
            self.lease = self.leases / f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
            self.lease.write_text(str(os.getpid()))
        self.base_url = str(info["base_url"])
        return self.base_url

    def healthy(self) -> bool:
        return self.base_url is not None and server_healthy(self.base_url[: -len("/v1")])

    def stop(self) -> None:
        if self.lease is not None:
            self.lease.unlink(missing_ok=True)
            self.lease = None
        self.base_url = None


def stop_all(folder: str | os.PathLike[str]) -> list[str]:
    """Stop every shared server this host registered in ``folder`` (the end of a run): the
    embedded model servers and the environment fork servers (:mod:`memtrials.envs.process.forkserver`)."""
    stopped = []
    host = socket.gethostname()
    for info_path in Path(folder).glob(f"*-{host}.json"):
        lock = info_path.with_suffix(".lock")
        with locked(lock):
            info = read_info(info_path)
            if info is None:
                continue
            pid = int(info["pid"])
            if alive(pid):
                try:
                    os.kill(pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
            info_path.unlink(missing_ok=True)
            stopped.append(str(info.get("endpoint", info.get("name"))))  # name: an environment fork server
    return stopped


def end_run(folder: str | os.PathLike[str]) -> tuple[list[str], list[int]]:
    """A workflow run's end (``onsuccess`` / ``onerror``): take back its run lease
    (:func:`memtrials.machine.hold_run`, taken at ``onstart``) and, unless another live run on
    this host still holds the servers, stop them all (:func:`stop_all`).  Returns (the servers
    stopped, the pids of the other runs that kept them running).  Two runs that share the servers
    folder (disjoint targets in one checkout, or checkouts sharing one cache folder) so no longer
    stop each other's servers in the middle of a call; left running, they stop themselves once idle."""
    others = release_run(Path(folder))
    if others:
        return [], others
    return stop_all(folder), []
