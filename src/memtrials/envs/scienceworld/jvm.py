"""Warm ScienceWorld JVMs, lent to one environment at a time and shared by a run's jobs on a machine.

Every :class:`~memtrials.envs.scienceworld.env.ScienceWorldEnv` drives its own JVM.  Starting one costs
about 4 CPU-s (class loading and the JIT compiling the engine's world building), 2-3 s of wall, more
than a whole short episode; a default run starts one per ScienceWorld job (about 50).  With
``envs.scienceworld.shared_jvm`` the first environment on a machine starts a *supervisor*
(``python -m memtrials.envs.scienceworld.jvm``), a small process that launches one JVM (py4j's
gateway, ScienceWorld's jar, :data:`~memtrials.envs.scienceworld.engine.JVM_OPTIONS`) and registers it;
an environment *borrows* an idle registered JVM (else starts another), opens its own py4j
connection and its own engine object (``PythonInterface``) there, and gives the JVM back when it
closes.  A JVM serves one environment at a time, so nothing runs in it concurrently; what a
borrower sees does not depend on what the JVM ran before (ScienceWorld keeps a world's state in its
engine object, and with the constant identity hash the order of a room's objects is the order
they were added): the same actions give the same observations, byte for byte, as in a fresh JVM
(``tests/envs/test_scienceworld_jvm.py``).  A borrowed JVM has already compiled the engine, so an
environment's start and first steps cost about a quarter of a fresh JVM's.

Bookkeeping, under ``<cache folder>/servers/`` beside the other shared processes
(:mod:`memtrials.machine`): per JVM ``scienceworld-jvm-<key>-<n>-<host>.json`` (the supervisor's pid,
the gateway's port, the JVM's pid) and ``.busy``, an ``fcntl`` lock its borrower holds for the
environment's lifetime (released by the kernel when the borrower dies, ``kill -9`` included); all
choices (borrow, register, retire) are made under one registry lock per key and host.  A
supervisor retires once its JVM has had no borrower for ``servers.idle_s`` seconds and when the run
ends (:func:`memtrials.llm.local.shared.stop_all`); its JVM exits with it (py4j's ``die_on_exit``: the JVM
reads its stdin, a pipe from the supervisor).  The key covers the jar, the ``java`` found, the JVM
options and this module's code, so a changed engine or option gets new JVMs.

``configure`` (from the pipeline config, next to the join switch) exports the setting as
:data:`SWITCH` so that environment children (spawned or forked) borrow too.  Off under a cluster
executor (:func:`memtrials.machine.cluster_job`), like the fork servers.  Whatever fails here makes
the environment start its own JVM, as before, with a log line.  A borrower's share of its JVM's CPU
(read from ``/proc`` at borrow and at return) is added to the job's children's CPU
(:data:`LENT_CPU_S`, read by :func:`memtrials.pipeline.rule_entry.job_cost`).
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from memtrials.io import atomic_write_text
from memtrials.machine import IdleClock, alive, cluster_job, locked, proc_stat, read_info, server_dir, start_detached

log = logging.getLogger(__name__)

SWITCH = "MEMTRIALS_SCIENCEWORLD_JVMS"
"""``{"dir": <servers folder>, "idle_s": <seconds>}`` as JSON: borrow shared JVMs (unset: each
environment starts its own)."""
START_TIMEOUT_S = 120.0
POLL_S = 0.5
LENT_CPU_S = [0.0]
"""CPU seconds the JVMs lent to this process spent while lent (they are not its children)."""


@contextmanager
def java_tool_options(options: tuple[str, ...]) -> Iterator[None]:
    """``JAVA_TOOL_OPTIONS`` with ``options`` after any the user set (ScienceWorld's launcher takes
    no JVM options), restored on leaving.  Not thread-safe: callers that may race hold a lock."""
    before = os.environ.get("JAVA_TOOL_OPTIONS")
    os.environ["JAVA_TOOL_OPTIONS"] = " ".join(filter(None, (before, *options)))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("JAVA_TOOL_OPTIONS", None)
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = before


class Unavailable(RuntimeError):
    """No shared JVM could be used; the caller starts its own."""


def configure(config: Mapping[str, Any]) -> None:
    """Export ``envs.scienceworld.shared_jvm`` (with the servers' folder and ``servers.idle_s``)
    to this process and its children."""
    on = config["envs"]["scienceworld"]["shared_jvm"]
    if not isinstance(on, bool):
        raise ValueError(f"envs.scienceworld.shared_jvm must be true or false, got {on!r}")
    if not on or cluster_job():
        os.environ.pop(SWITCH, None)
        return
    os.environ[SWITCH] = json.dumps({"dir": str(server_dir(config).resolve()),
                                     "idle_s": float(config["servers"]["idle_s"])})


def settings() -> dict[str, Any] | None:
    """The exported setting, or ``None`` (off, or unreadable)."""
    raw = os.environ.get(SWITCH)
    if not raw:
        return None
    try:
        found = json.loads(raw)
        return {"dir": str(found["dir"]), "idle_s": float(found["idle_s"])}
    except (ValueError, KeyError, TypeError):
        return None


def jvm_key(jvm_options: tuple[str, ...]) -> str:
    """What makes two JVMs interchangeable: the jar, the ``java`` used, the options, this code."""
    from scienceworld.constants import JAR_PATH

    jar = Path(JAR_PATH)
    java = shutil.which("java") or "java"
    ident = {"jar": str(jar.resolve()), "jar_stat": [jar.stat().st_size, jar.stat().st_mtime_ns],
             "java": os.path.realpath(java), "java_home": os.environ.get("JAVA_HOME"),
             "tool_options": os.environ.get("JAVA_TOOL_OPTIONS"), "options": list(jvm_options),
             "code": Path(__file__).stat().st_mtime_ns, "python": sys.executable}
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]


def _stem(key: str, n: int | str) -> str:
    return f"scienceworld-jvm-{key}-{n}-{socket.gethostname()}"


def registry_lock(folder: Path, key: str) -> Path:
    return folder / f"scienceworld-jvm-{key}-{socket.gethostname()}.registry"


def _try_lock(path: Path) -> int | None:
    """An fd holding an exclusive lock on ``path``, or ``None`` if another holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def jvm_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` so far, 0 if it cannot be read."""
    fields = proc_stat(pid)
    if fields is None:
        return 0.0
    try:
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError):
        return 0.0


@dataclass
class Lease:
    """One borrowed JVM: its gateway's port and the lock that keeps it this borrower's."""

    port: int
    java_pid: int
    info: Path
    fd: int
    cpu_at_start: float = field(default=0.0)

    def release(self) -> None:
        """Give the JVM back (idempotent); count its CPU since the borrow as this process's."""
        if self.fd < 0:
            return
        LENT_CPU_S[0] += max(0.0, jvm_cpu(self.java_pid) - self.cpu_at_start)
        os.close(self.fd)
        self.fd = -1


def borrow(folder: str | os.PathLike[str], idle_s: float, jvm_options: tuple[str, ...]) -> Lease:
    """An idle registered JVM (locked for the caller), else a new one; :class:`Unavailable` if
    none can be had."""
    base = Path(folder)
    base.mkdir(parents=True, exist_ok=True)
    key = jvm_key(jvm_options)
    try:
        with locked(registry_lock(base, key)):
            used: set[str] = set()
            for info in sorted(base.glob(f"scienceworld-jvm-{key}-*-{socket.gethostname()}.json")):
                used.add(info.name)
                found = read_info(info)
                if found is None:
                    continue  # being written
                if not alive(int(found["pid"])):  # a supervisor killed outright: forget it
                    info.unlink(missing_ok=True)
                    info.with_suffix(".busy").unlink(missing_ok=True)
                    continue
                if not alive(int(found["java_pid"])):
                    continue  # its supervisor retires it
                fd = _try_lock(info.with_suffix(".busy"))
                if fd is not None:
                    return Lease(int(found["port"]), int(found["java_pid"]), info, fd,
                                 jvm_cpu(int(found["java_pid"])))
            n = next(i for i in range(len(used) + 1) if f"{_stem(key, i)}.json" not in used)
            stem = _stem(key, n)
            info = base / f"{stem}.json"
            cmd = [sys.executable, "-m", "memtrials.envs.scienceworld.jvm", "--info", str(info),
                   "--registry", str(registry_lock(base, key)), "--idle", str(idle_s),
                   "--options", json.dumps(list(jvm_options))]
            found = start_detached(cmd, info, base / f"{stem}.log", "a ScienceWorld JVM supervisor",
                                   START_TIMEOUT_S, 0.05, Unavailable)
            fd = _try_lock(info.with_suffix(".busy"))
            if fd is None:  # nothing else can see it before the registry lock is released
                raise Unavailable(f"a new ScienceWorld JVM ({info}) was locked by another process")
            return Lease(int(found["port"]), int(found["java_pid"]), info, fd, jvm_cpu(int(found["java_pid"])))
    except OSError as exc:
        raise Unavailable(f"shared ScienceWorld JVMs in {base}: {exc}") from exc


# --- the supervisor ------------------------------------------------------------------------------

def serve(info: Path, registry: Path, idle_s: float, jvm_options: tuple[str, ...]) -> int:
    """Launch one JVM, register it, and retire once it has had no borrower for ``idle_s`` s."""
    from py4j.java_gateway import launch_gateway
    from scienceworld.constants import BASEPATH, JAR_PATH

    with java_tool_options(jvm_options):
        port, proc = launch_gateway(classpath=JAR_PATH, die_on_exit=True, cwd=BASEPATH, return_proc=True)
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    atomic_write_text(info, json.dumps({"pid": os.getpid(), "port": port, "java_pid": proc.pid,
                                        "name": "scienceworld-jvm", "host": socket.gethostname()}))
    print(f"scienceworld-jvm: ready (pid {os.getpid()}, JVM pid {proc.pid}, port {port})", flush=True)
    clock = IdleClock(idle_s)
    busy = info.with_suffix(".busy")
    why = "stopped"
    while not stopping:
        time.sleep(POLL_S)
        if proc.poll() is not None:
            why = f"the JVM exited (code {proc.returncode})"
            info.unlink(missing_ok=True)
            break
        with locked(registry):
            fd = _try_lock(busy)
            if fd is not None:
                os.close(fd)
            if clock.expired(fd is None):
                current = read_info(info)
                if current is not None and int(current.get("pid", -1)) == os.getpid():
                    info.unlink(missing_ok=True)
                why = f"idle for {idle_s:g} s"
                break
    print(f"scienceworld-jvm: {why}; the JVM used {jvm_cpu(proc.pid):.2f} CPU-s", flush=True)
    proc.stdin.close()  # die_on_exit: the JVM ends when its stdin closes
    try:
        proc.wait(timeout=10)
    except Exception:  # noqa: BLE001
        proc.kill()
    busy.unlink(missing_ok=True)
    return 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--info", type=Path, required=True)
    ap.add_argument("--registry", type=Path, required=True)
    ap.add_argument("--idle", type=float, required=True)
    ap.add_argument("--options", default="[]")
    args = ap.parse_args(argv)
    sys.exit(serve(args.info, args.registry, args.idle, tuple(json.loads(args.options))))


if __name__ == "__main__":
    main()
