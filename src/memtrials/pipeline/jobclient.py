"""A Snakemake job's hand-over to the warm job server (the job side of :mod:`memtrials.pipeline.jobserver`).

Every ``workflow/scripts/*.py`` starts with::

    from memtrials.pipeline.jobclient import hand_over
    hand_over(snakemake, __file__)  # noqa: F821

With ``servers.job_server`` on (and outside Slurm and Kubernetes) :func:`hand_over` sends the
job to this machine's job server (starting it under a lock on first need): the pickled
``snakemake`` object, the script's path, the working folder, ``os.environ``, ``sys.argv``,
``sys.path`` and the job's stdin, stdout and stderr as file descriptors.  The server forks a
child that runs the same script file in the job's folder with the job's environment and
output; this process waits for the child's exit status and exits with it.  It returns only
when no server can be used (it is off, it could not start, it refused): then the script goes
on in this process exactly as without a server, after one line on stderr saying why (none
when the key is off).  In the forked child ``hand_over`` is a no-op.

This module runs before anything else of a job, so it imports only the standard library
(and :mod:`memtrials.machine`, which does too): Snakemake's preamble has already paid for
Python's start and for ``snakemake.script``.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

from memtrials.machine import (  # noqa: F401  (CLUSTER_VARIABLES: re-exported)
    CLUSTER_VARIABLES, alive, cluster_job, connect_abstract, locked, proc_stat, read_info, server_dir, start_detached,
)

SERVED: dict[str, Any] | None = None
"""In a child forked by the job server: what the client measured at the hand-over
(``client_cpu_s``, ``started_at`` as a Unix time, ``client_pid``, ``server_pid``);
``None`` in a job's own process."""

KEY_ENV: tuple[str, ...] = ("PYTHONHASHSEED", "PYTHONPATH", "OMP_NUM_THREADS", "GOTO_NUM_THREADS",
                            "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                            "NUMEXPR_NUM_THREADS")
"""Variables read when the server's imports load (the hash seed; the BLAS thread counts that
Snakemake sets per job from its ``threads``; every other ``PYTHON*`` variable too): a job with
other values gets another server."""

START_TIMEOUT_S = 120.0
PACKAGE = Path(__file__).resolve().parents[1]  # the memtrials package folder
NAME = "jobserver"


class Unavailable(RuntimeError):
    """No job server could be used; the script runs in its own process."""


def enabled(config: Any) -> bool:
    """Whether ``config`` (the job's) asks for the job server and this is no cluster job."""
    try:
        on = bool(((config or {}).get("servers") or {}).get("job_server"))
    except AttributeError:
        return False
    return on and cluster_job() is None


def code_files(scripts: str | os.PathLike[str]) -> list[tuple[str, int, int]]:
    """(path, mtime ns, size) of every ``memtrials/**/*.py`` and ``<scripts>/*.py``."""
    out = []
    for root in (PACKAGE, Path(scripts)):
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for f in sorted(files):
                if f.endswith(".py"):
                    st = os.stat(os.path.join(folder, f))
                    out.append((os.path.join(folder, f), st.st_mtime_ns, st.st_size))
            if root != PACKAGE:
                break
    return out


def server_key(scripts: str | os.PathLike[str], path: list[str] | None = None) -> str:
    """Interpreter, package folder, ``sys.path``, :data:`KEY_ENV` and :func:`code_files`: an
    edit to any module or script (or another interpreter or hash seed) gets a new server."""
    env = {k: v for k, v in os.environ.items() if k.startswith("PYTHON")}  # PYTHONWARNINGS, PYTHONUNBUFFERED, ...
    env.update({k: os.environ.get(k) for k in KEY_ENV})
    ident = {"python": sys.executable, "package": str(PACKAGE), "path": list(sys.path if path is None else path),
             "env": env, "code": code_files(scripts)}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]


def paths(folder: str | os.PathLike[str], key: str) -> dict[str, Path]:
    """The server's info, lock and log files (``stop_all`` stops every ``*-<host>.json`` there)."""
    stem = f"{NAME}-{key}-{socket.gethostname()}"
    base = Path(folder).resolve()
    return {"info": base / f"{stem}.json", "lock": base / f"{stem}.lock", "log": base / f"{stem}.log"}


def start(p: dict[str, Path], key: str, scripts: str, idle_s: float) -> dict[str, Any]:
    """Start a server (the caller holds the lock) and wait for its info file."""
    address = f"memtrials-{NAME}-{key}-{os.getpid()}-{time.time_ns()}"
    boot = ("import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
            "from memtrials.pipeline.jobserver import main; main(sys.argv[2:])")
    cmd = [sys.executable, "-c", boot, json.dumps(sys.path), "--address", address, "--info", str(p["info"]),
           "--lock", str(p["lock"]), "--idle", str(idle_s), "--scripts", str(scripts), "--package", str(PACKAGE)]
    return start_detached(cmd, p["info"], p["log"], "the job server", START_TIMEOUT_S, 0.02, Unavailable)


def connect(config: Any, scripts: str) -> socket.socket:
    """A connection to this machine's job server for ``config`` (started if none is alive)."""
    key = server_key(scripts)
    p = paths(server_dir(config), key)
    with locked(p["lock"]):
        info = read_info(p["info"])
        if info is not None and alive(int(info["pid"])):
            try:
                return connect_abstract(str(info["address"]))
            except OSError:
                pass
        info = start(p, key, scripts, float(config["servers"]["idle_s"]))
        return connect_abstract(str(info["address"]))


def process_start() -> float | None:
    """This process's start as a Unix time (Linux ``/proc``), or ``None``."""
    fields = proc_stat()
    if fields is None:
        return None
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from ``sock`` (the framing both ends of a hand-over read:
    the request's length, the child's ``P`` and pid, the ``S`` and status); ``EOFError``
    when the other end closes first."""
    buf = b""
    while len(buf) < n:
        more = sock.recv(n - len(buf))
        if not more:
            raise EOFError
        buf += more
    return buf


def request(smk: Any, script: str) -> dict[str, Any]:
    t = os.times()
    return {"snakemake": smk, "script": os.path.abspath(script), "cwd": os.getcwd(), "env": dict(os.environ),
            "argv": list(sys.argv), "path": list(sys.path), "client_pid": os.getpid(),
            "client_cpu_s": t.user + t.system, "started_at": process_start(),
            "fds": [fd for fd in (0, 1, 2) if _is_open(fd)]}


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False


def send(sock: socket.socket, req: dict[str, Any]) -> None:
    """The request: its length and the job's descriptors in one message, then the pickle."""
    payload = pickle.dumps(req, protocol=pickle.HIGHEST_PROTOCOL)
    sys.stdout.flush()
    sys.stderr.flush()
    socket.send_fds(sock, [len(payload).to_bytes(8, "big")], req["fds"])
    sock.sendall(payload)


def wait(sock: socket.socket) -> int:
    """After the child's ``P``, its pid: forward SIGINT/SIGTERM/SIGHUP to it, wait for its status
    (``S``, from the child itself or from the server that reaped it) and return it."""
    child = struct.unpack(">q", recv_exact(sock, 8))[0]

    def forward(signum: int, _frame: Any) -> None:
        try:
            os.killpg(child, signum)
        except OSError:
            pass

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, forward)
    try:
        while True:
            tag = recv_exact(sock, 1)
            if tag == b"S":
                code = struct.unpack(">i", recv_exact(sock, 4))[0]
                return code if code >= 0 else 128 - code  # killed by a signal: the shell's convention
    except (EOFError, OSError):
        print(f"job server: lost the job's child (pid {child}) without its exit status", file=sys.stderr, flush=True)
        return 1


def hand_over(smk: Any, script: str) -> None:
    """Run this job in a child of the job server and exit with its status; return (and let the
    script go on here) when no server can be used."""
    if SERVED is not None or not enabled(getattr(smk, "config", None)):
        return
    try:
        sock = connect(smk.config, os.path.dirname(os.path.abspath(script)))
        try:
            send(sock, request(smk, script))
            tag = recv_exact(sock, 1)  # the child's "P"; none when the server refused to fork
            if tag != b"P":
                raise Unavailable(f"unexpected reply {tag!r}")
        except BaseException:
            sock.close()
            raise
    except Exception as exc:  # noqa: BLE001  (no child has the job yet: it runs here)
        print(f"job server: unavailable ({exc!r}); running the job in its own process", file=sys.stderr, flush=True)
        return
    code = wait(sock)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
