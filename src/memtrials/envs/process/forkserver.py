"""A warm per-machine process that forks environment children (an environment "zygote").

A spawned environment child (:class:`~memtrials.envs.process.child.ProcessEnv`) pays its engine's
imports before it plays anything: AppWorld's package and its apps' FastAPI routes (3.5-4
CPU-s), TextWorld and ALFWorld (2-3).  With ``envs.fork_server`` the first job that needs an
engine starts one fork server for it on the machine; the server imports the engine once
(and, for AppWorld, every app's API module, without opening a world) and ``os.fork()``\\ s a
child for every environment a job asks for.  The child takes the job's working folder,
environment variables, stdout and stderr, builds the environment with the job's options
and answers the same pickled protocol as a spawned child (:func:`memtrials.envs.process.protocol.serve`), over the
Unix socket the job connected on; EOF on it (the job closed or was killed) ends the child,
and so does the job's death in the middle of a step (a watchdog thread in the child).

One server per (engine, the options that matter at import time: AppWorld's data root;
interpreter, package folder and the modification times of ``memtrials/envs/*.py``, so an
edited engine adapter gets a new server; ``PYTHONHASHSEED``; host).  Its bookkeeping is the shared
servers' (:mod:`memtrials.llm.local.shared`): ``<cache folder>/servers/envfork-<engine>-<key>-<host>
.json`` under its ``.lock``; the socket is in Linux's abstract namespace (no file, no path
length limit).  The server stops once it has had no child for ``servers.idle_s`` seconds
(decided under the lock, so a job never joins a leaving server) and when the run ends
(:func:`memtrials.llm.local.shared.stop_all` stops every process registered there).  Whatever
fails here (no server starts, the socket refuses) makes ``ProcessEnv`` spawn its child
as before, with a log line.

The server stays single-threaded (it refuses to fork otherwise): its idle clock runs in
the accept loop, not in a watchdog thread.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import pickle
import select
import socket
import struct
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from memtrials.machine import (  # noqa: F401  (CLUSTER_VARIABLES: re-exported)
    CLUSTER_VARIABLES, IdleClock, alive, cluster_job, connect_abstract, listen_abstract, locked, may_fork, peer_uid,
    proc_stat, read_info, register_server, retire, same_user, server_dir, start_detached,
)

log = logging.getLogger(__name__)

FORK_ENVS: tuple[str, ...] = ("appworld", "alfworld")
"""Engines a fork server can serve (ScienceWorld's JVM gateway is not fork-safe)."""
START_TIMEOUT_S = 240.0
_settings: dict[str, Any] | None = None
FORKED_CPU_S = [0.0]
"""CPU seconds the forked children of this process reported when they closed (they are the
fork server's children, so ``RUSAGE_CHILDREN`` of the job does not count them)."""


class Unavailable(RuntimeError):
    """No fork server could be used; the caller spawns its child instead."""


def configure(config: Mapping[str, Any] | None) -> None:
    """Use fork servers in this process as the pipeline config says (``envs.fork_server``,
    ``servers.idle_s``; the folder is the shared servers' beside the response cache)."""
    envs = (config or {}).get("envs") or {}
    if not envs.get("fork_server") or cluster_job():
        use(None)
        return
    use(server_dir(config), float(config["servers"]["idle_s"]))  # type: ignore[arg-type,index]


def use(folder: str | os.PathLike[str] | None, idle_s: float = 30.0) -> None:
    """Use fork servers registered in ``folder`` (``None``: spawn children, the default)."""
    global _settings
    _settings = None if folder is None else {"dir": str(folder), "idle_s": float(idle_s)}


def settings() -> dict[str, Any] | None:
    return None if _settings is None else dict(_settings)


def warm_options(name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """What of ``options`` the server of ``name`` must fix before its imports."""
    if name != "appworld":
        return {}
    root = options.get("root")
    if root is None and options.get("official"):
        root = os.environ.get("APPWORLD_ROOT")
    root = Path(root if root is not None else "resources/appworld").resolve()
    try:  # a rebuilt data root (rule env_appworld_data writes a new data/) gets a new server
        built = (root / "data").stat().st_mtime_ns
    except OSError:
        built = None
    return {"root": str(root), "data_mtime_ns": built}


def server_key(name: str, warm: Mapping[str, Any]) -> str:
    import memtrials

    package = Path(memtrials.__file__).resolve().parent
    code = sorted((p.name, p.stat().st_mtime_ns) for p in (package / "envs").glob("*.py"))  # an edit: a new server
    ident = {"name": name, "warm": dict(warm), "python": sys.executable, "package": str(package), "code": code,
             "hashseed": os.environ.get("PYTHONHASHSEED"), "pythonpath": os.environ.get("PYTHONPATH")}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]


def paths(folder: str | os.PathLike[str], name: str, key: str) -> dict[str, Path]:
    stem = f"envfork-{name}-{key}-{socket.gethostname()}"
    base = Path(folder)
    return {"info": base / f"{stem}.json", "lock": base / f"{stem}.lock", "log": base / f"{stem}.log"}


def _start(name: str, warm: Mapping[str, Any], p: Mapping[str, Path], key: str, idle_s: float) -> dict[str, Any]:
    """Start a server (the caller holds the lock) and wait for its info file."""
    address = f"memtrials-envfork-{name}-{key}-{os.getpid()}-{time.time_ns()}"
    cmd = [sys.executable, "-m", "memtrials.envs.process.forkserver", "--name", name, "--warm", json.dumps(dict(warm)),
           "--address", address, "--info", str(p["info"]), "--lock", str(p["lock"]), "--idle", str(idle_s)]
    return start_detached(cmd, p["info"], p["log"], f"the {name} fork server", START_TIMEOUT_S, 0.05, Unavailable)


def open_child(name: str, options: Mapping[str, Any]) -> socket.socket:
    """A socket to a new forked child of ``name`` that builds ``options`` (request sent);
    the child's first reply is the build's outcome.  Raises :class:`Unavailable`."""
    cfg = settings()
    if cfg is None or name not in FORK_ENVS:
        raise Unavailable("fork servers are off")
    warm = warm_options(name, options)
    key = server_key(name, warm)
    p = paths(cfg["dir"], name, key)
    try:
        with locked(p["lock"]):
            info = read_info(p["info"])
            sock = None
            if info is not None and alive(int(info["pid"])):
                try:
                    sock = connect_abstract(str(info["address"]))
                except OSError:
                    sock = None
            if sock is None:
                info = _start(name, warm, p, key, cfg["idle_s"])
                sock = connect_abstract(str(info["address"]))
            request = {"name": name, "options": dict(options), "cwd": os.getcwd(), "env": dict(os.environ)}
            payload = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
            sys.stdout.flush()
            sys.stderr.flush()
            socket.send_fds(sock, [len(payload).to_bytes(8, "big") + payload], [1, 2])
            return sock
    except Unavailable:
        raise
    except (OSError, ValueError, KeyError, pickle.PicklingError) as exc:
        raise Unavailable(f"the {name} fork server ({p['info']}): {exc!r}") from exc


# --- the server ----------------------------------------------------------------------------

def warm_up(name: str, warm: Mapping[str, Any]) -> None:
    """Import what every child of ``name`` imports, in the order a spawned child does."""
    from memtrials.envs import engines  # noqa: F401  (what a spawned child imports first)

    if name == "appworld":
        os.environ["APPWORLD_ROOT"] = str(warm["root"])  # as AppWorldEnv sets it before importing AppWorld
        from appworld.common.path_store import path_store

        path_store.update_root(str(warm["root"]))
        from appworld import AppWorld  # noqa: F401
        from appworld.apps import get_all_apps
        from appworld.common.utils import import_apis_module

        import memtrials.envs.appworld.env  # noqa: F401

        for app in get_all_apps():  # builds every app's FastAPI routes; opens no world
            import_apis_module(app)
    elif name == "alfworld":
        import textworld  # noqa: F401
        from alfworld.agents.environment.alfred_tw_env import AlfredDemangler  # noqa: F401
        from textworld.envs import PddlEnv  # noqa: F401

        import memtrials.envs.alfworld.env  # noqa: F401
        import memtrials.envs.alfworld.speed  # noqa: F401


# AppWorld null-patches unsafe functions (os._exit, time.sleep, open, ...) while it runs an
# action's code: the child's watchdog holds the originals, taken at import (open: memtrials.machine).
_EXIT, _SLEEP = os._exit, time.sleep


def _running(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie (a killed job its parent has not reaped yet)."""
    fields = proc_stat(pid)
    return fields is not None and fields[0] != "Z"


def _watch_client(conn: socket.socket, poll_s: float = 1.0) -> None:
    """End this child once the job on the other end of ``conn`` is gone, even in the middle of
    a step that never returns (EOF is only read between requests)."""
    pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]

    def watch() -> None:
        while _running(pid):
            _SLEEP(poll_s)
        _EXIT(0)

    threading.Thread(target=watch, daemon=True).start()


def _child(conn: socket.socket, listener: socket.socket) -> None:
    """In the forked child: take the job's folder, environment and output; serve; exit."""
    code = 0
    try:
        listener.close()
        _watch_client(conn)
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 16, 2)
        while len(msg) < 8 or len(msg) < 8 + int.from_bytes(msg[:8], "big"):
            more = conn.recv(1 << 16)
            if not more:
                raise EOFError("the job closed the socket before its request")
            msg += more
        if len(fds) == 2:
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
        for fd in fds:
            os.close(fd)
        request = pickle.loads(msg[8:])
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        if "numpy" in sys.modules:  # a spawned child's numpy starts from fresh entropy too
            sys.modules["numpy"].random.seed()
        from memtrials.envs.process.protocol import serve

        rd, wr = conn.makefile("rb"), conn.makefile("wb")
        serve(rd, wr, request["name"], request["options"])
    except BaseException:  # noqa: BLE001  (a child never returns into the server's loop)
        code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def serve_forever(name: str, warm: Mapping[str, Any], address: str, info: Path, lock: Path, idle_s: float,
                  poll_s: float = 0.5) -> None:
    """The server: warm up, register, fork a child per connection, stop when idle."""
    warm_up(name, warm)
    warm_cpu = os.times().user + os.times().system  # the interpreter's start, imports and warm-up
    listener = listen_abstract(address)
    register_server(info, address, f"envfork-{name}", warm_cpu, warm=dict(warm))
    print(f"envfork {name}: ready (pid {os.getpid()}, warm-up {warm_cpu:.2f} CPU-s)", flush=True)
    children: set[int] = set()
    clock = IdleClock(idle_s)
    forked = 0

    def fork(conn: socket.socket) -> None:
        nonlocal forked
        if not may_fork(f"envfork {name}", conn):
            return
        pid = os.fork()
        if pid == 0:
            _child(conn, listener)
        conn.close()
        children.add(pid)
        forked += 1

    while True:
        ready, _, _ = select.select([listener], [], [], poll_s)
        if ready:
            conn, _ = listener.accept()
            if same_user(conn):
                fork(conn)
            else:
                log.warning("refused a connection from user %s", peer_uid(conn))
                conn.close()
        while children:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            children.discard(pid)
        if not clock.expired(bool(children) or bool(ready)):
            continue
        if not retire(listener, lock, info):  # a job connected while the clock ran out: it keeps the server
            clock.reset()
            continue
        print(f"envfork {name}: idle {idle_s:.0f} s after {forked} children, stopping", flush=True)
        return


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m memtrials.envs.process.forkserver")
    parser.add_argument("--name", required=True, choices=FORK_ENVS)
    parser.add_argument("--warm", default="{}")
    parser.add_argument("--address", required=True)
    parser.add_argument("--info", required=True)
    parser.add_argument("--lock", required=True)
    parser.add_argument("--idle", type=float, default=30.0)
    a = parser.parse_args(argv)
    serve_forever(a.name, json.loads(a.warm), a.address, Path(a.info), Path(a.lock), a.idle)


if __name__ == "__main__":
    main()
