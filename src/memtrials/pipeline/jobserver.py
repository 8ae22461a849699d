"""A warm per-machine process that forks each Snakemake job's Python (a job "zygote").

Without it every job of a run is a fresh Python process that pays about 1 CPU-s of imports
(pandas, pyarrow, numpy, jsonschema, the package's own modules) before it does anything; in a
fully cached rerun that is most of a job's cost.  With ``servers.job_server`` the first job
on a machine starts one job server (:func:`memtrials.pipeline.jobclient.connect`, under a lock); the
server imports what the workflow's scripts import (:func:`memtrials.pipeline.jobwarmup.warm_up`) once, and
``os.fork()``\\ s a child for every job that connects.  The child takes the job's working
folder, environment, ``sys.argv``, ``sys.path``, stdin, stdout and stderr (sent as file
descriptors), reseeds numpy's global generator (``random`` reseeds itself after a fork),
resets logging, runs the job's script file as ``__main__`` with its ``snakemake`` object
bound and ends with the script's status: 0, ``n`` for ``SystemExit(n)``, 1 and the
traceback on the job's stderr for an uncaught exception.  The job's own process (the
client) waits for that status and exits with it, so Snakemake sees the job as before.

The client's death (Snakemake cancels the job, ``kill -9``) ends the child and whatever
it started in its process group: a watchdog thread in the child reads the client's socket,
and EOF before the job has finished is the client gone.  SIGINT, SIGTERM and SIGHUP sent
to the client are forwarded to the child's group.

One server per (interpreter, package folder, ``sys.path``, ``PYTHONHASHSEED``, the BLAS
thread variables, the modification times and sizes of every ``memtrials/**/*.py`` and
``workflow/scripts/*.py``, host) (:func:`memtrials.pipeline.jobclient.server_key`), so an edited
module gets a new server.  Its bookkeeping is the shared servers' (``<cache folder>/servers/
jobserver-<key>-<host>.json`` under its ``.lock``, an abstract Unix socket); it stops after
``servers.idle_s`` seconds without a job (decided under the lock) and when the run ends
(:func:`memtrials.llm.local.shared.stop_all`).  It stays single-threaded (it refuses to fork
otherwise; the client then runs the job itself) and logs its warm-up CPU once when ready,
each child's exit status and CPU (with what it waited for) when it reaps it, and its own and
its children's total CPU when it stops.  Those children are not Snakemake's: a benchmark that
sums Snakemake's waited CPU adds them from this log (``benchmarks/bench_cached_rerun.py``).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import pickle
import select
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from memtrials.machine import (IdleClock, listen_abstract, may_fork, peer_uid, read_info, register_server, retire,
                                same_user)
from memtrials.pipeline import jobclient
from memtrials.pipeline.jobwarmup import denied_loaded, warm_up


# --- the child -------------------------------------------------------------------------------

def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _watch_client(conn: socket.socket, done: threading.Event) -> None:
    """End this child's process group once the client's end of ``conn`` closes before the job
    is done (Snakemake killed the job)."""

    def watch() -> None:
        try:
            while conn.recv(1):
                pass
        except OSError:
            pass
        if not done.is_set():
            os.killpg(0, signal.SIGKILL)

    threading.Thread(target=watch, name="jobserver-watchdog", daemon=True).start()


def run_script(req: dict[str, Any]) -> int:
    """Run the job's script as ``__main__`` in this process; its exit status."""
    import builtins
    import types

    script = req["script"]
    main = types.ModuleType("__main__")
    main.__dict__.update({"__file__": script, "__builtins__": builtins, "snakemake": req["snakemake"]})
    sys.modules["__main__"] = main
    try:
        with open(script, "rb") as fh:
            code = compile(fh.read(), script, "exec")
        exec(code, main.__dict__)  # noqa: S102  (the job's own script, as Python would run it)
        return 0
    except SystemExit as exc:
        return _exit_code(exc)
    except KeyboardInterrupt as exc:
        _print_exception(exc)
        return 130
    except BaseException as exc:  # noqa: BLE001
        _print_exception(exc)
        return 1


def _print_exception(exc: BaseException) -> None:
    """The traceback Python prints for an uncaught exception, less this module's frame."""
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)


def _child(conn: socket.socket, keep_out: list[Any]) -> None:
    """In the forked child: take the job's folder, environment and descriptors; run; exit."""
    code = 1
    done = threading.Event()
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        for held in keep_out:  # the listener, the wake-up pipe, the other jobs' connections
            try:
                held.close() if isinstance(held, socket.socket) else os.close(held)
            except OSError:
                pass
        os.setsid()  # its own group: the watchdog ends it and what it started, nothing else
        msg, fds, _, _ = socket.recv_fds(conn, 8, 3)
        if len(msg) < 8:
            msg += jobclient.recv_exact(conn, 8 - len(msg))
        req = pickle.loads(jobclient.recv_exact(conn, int.from_bytes(msg, "big")))
        for target, fd in zip(req["fds"], fds):
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        # "P" and this pid: the job's process now waits for this child's status; until it has
        # them it may still run the job itself, so nothing of the job runs before they are sent
        conn.sendall(b"P" + struct.pack(">q", os.getpid()))
        _watch_client(conn, done)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        sys.argv[:] = req["argv"]
        sys.path[:] = req["path"]
        import tempfile

        tempfile.tempdir = None  # TMPDIR is the job's
        if "numpy" in sys.modules:  # a fresh process's numpy starts from fresh entropy too
            sys.modules["numpy"].random.seed()
        root = logging.getLogger()
        for h in list(root.handlers):
            root.removeHandler(h)
        root.setLevel(logging.WARNING)
        sys.stdout.reconfigure(line_buffering=os.isatty(1))
        jobclient.SERVED = {"client_pid": req["client_pid"], "client_cpu_s": req["client_cpu_s"],
                            "started_at": req["started_at"], "server_pid": os.getppid()}
        code = run_script(req)
        shutdown = getattr(threading, "_shutdown", None)
        if shutdown is not None:  # what a normal exit does: join non-daemon threads, then atexit
            shutdown()
        import atexit

        atexit._run_exitfuncs()
    except BaseException:  # noqa: BLE001  (a child never returns into the server's loop)
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
    finally:
        done.set()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BaseException:  # noqa: BLE001
            pass
        try:
            conn.sendall(b"S" + struct.pack(">i", code))
        except BaseException:  # noqa: BLE001
            pass
        os._exit(code)


# --- the server ------------------------------------------------------------------------------

def _peer(conn: socket.socket) -> int:
    """The pid of the process on the other end of ``conn``, or -1."""
    try:
        return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[0]
    except OSError:
        return -1


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def serve_forever(address: str, info: Path, lock: Path, idle_s: float, scripts: str, poll_s: float = 0.5) -> None:
    """Warm up, register, fork a child per connection, stop when idle or on SIGTERM."""
    failed = warm_up(scripts)
    for line in failed:
        print(f"jobserver: warm-up import failed (the job imports it itself): {line}", flush=True)
    denied = denied_loaded()
    if denied:
        print(f"jobserver: warm-up imported {', '.join(denied)} (should be left to the jobs)", flush=True)
    gc.collect()
    gc.freeze()  # the children's collections skip the warm-up's objects (and leave their pages shared)
    warm_cpu = _cpu()
    listener = listen_abstract(address)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda *_: None)

    def stop(*_: Any) -> None:
        current = read_info(info)  # stop_all unlinks it too; a plain SIGTERM leaves no stale file
        if current is not None and int(current.get("pid", -1)) == os.getpid():
            info.unlink(missing_ok=True)
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    register_server(info, address, jobclient.NAME, warm_cpu)
    print(f"jobserver: ready (pid {os.getpid()}, warm-up {warm_cpu:.2f} CPU-s, {len(sys.modules)} modules)",
          flush=True)
    children: dict[int, socket.socket] = {}
    clock = IdleClock(idle_s)
    forked = 0
    jobs_cpu = [0.0]
    why = "SIGTERM"

    def fork(conn: socket.socket) -> None:
        nonlocal forked
        if not may_fork("jobserver", conn):
            return
        sys.stdout.flush()
        sys.stderr.flush()
        keep_out = [listener, wake_r, wake_w, *children.values()]
        pid = os.fork()
        if pid == 0:
            _child(conn, keep_out)
        children[pid] = conn
        forked += 1

    def reap() -> None:
        while children:
            try:
                pid, status, usage = os.wait4(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = children.pop(pid, None)
            if conn is None:
                continue
            cpu = usage.ru_utime + usage.ru_stime  # the child's and the processes it waited for
            jobs_cpu[0] += cpu
            print(f"jobserver: child {pid} (job process {_peer(conn)}) exited {os.waitstatus_to_exitcode(status)}, "
                  f"{cpu:.2f} CPU-s", flush=True)
            try:  # the child sent its own status first unless it was killed
                conn.sendall(b"S" + struct.pack(">i", os.waitstatus_to_exitcode(status)))
            except OSError:
                pass
            conn.close()

    try:
        while True:
            try:
                ready, _, _ = select.select([listener, wake_r], [], [], poll_s)
            except InterruptedError:
                ready = []
            if wake_r in ready:
                try:
                    while os.read(wake_r, 512):
                        pass
                except BlockingIOError:
                    pass
            reap()
            accepted = listener in ready
            if accepted:
                conn, _ = listener.accept()
                if same_user(conn):
                    fork(conn)
                else:
                    print(f"jobserver: refused a connection from user {peer_uid(conn)}", flush=True)
                    conn.close()
            if not clock.expired(bool(children) or accepted):
                continue
            if not retire(listener, lock, info):  # a job connected while the clock ran out: it keeps the server
                clock.reset()
                continue
            why = f"idle {idle_s:.0f} s"
            return
    finally:
        deadline = time.monotonic() + 1.0  # a job that has just sent its status: log it (the rest run on)
        while children and time.monotonic() < deadline:
            reap()
            time.sleep(0.02)
        print(f"jobserver: {why} after {forked} jobs, {_cpu():.2f} CPU-s in the server (warm-up "
              f"{warm_cpu:.2f}), {jobs_cpu[0]:.2f} CPU-s in the jobs' children it reaped", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="memtrials.pipeline.jobserver")
    parser.add_argument("--address", required=True)
    parser.add_argument("--info", required=True)
    parser.add_argument("--lock", required=True)
    parser.add_argument("--idle", type=float, default=30.0)
    parser.add_argument("--scripts", required=True)
    parser.add_argument("--package", help="the client's package folder (refused if this is another)")
    a = parser.parse_args(argv)
    if a.package and Path(a.package).resolve() != jobclient.PACKAGE:
        sys.exit(f"jobserver: this interpreter imports memtrials from {jobclient.PACKAGE}, the job from {a.package}")
    serve_forever(a.address, Path(a.info), Path(a.lock), a.idle, a.scripts)
