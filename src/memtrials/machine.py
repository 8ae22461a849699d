"""What the processes of one machine share: locks, info files, leases, idle clocks, and the
watchdog that ends a helper process.

Three kinds of long-lived helper process are shared by the cells of a run on one machine:
the embedded model servers (:mod:`memtrials.llm.local.shared`), the environment fork servers
(:mod:`memtrials.envs.process.forkserver`) and the warm job server (:mod:`memtrials.pipeline.jobserver`).
Each keeps one ``.json`` info file per process under an ``fcntl`` lock and stops once idle;
the pieces they share live here, below every layer (this module imports nothing of the
package but :mod:`memtrials.io`).  A server child runs :func:`watch_in_thread`, which ends it
when its parent is gone (a per-cell server) or when no live lease has existed for ``idle``
seconds (a shared one).  The two fork servers also share how they listen, register and refuse
to fork (:func:`listen_abstract`, :func:`register_server`, :func:`may_fork`).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import select
import struct
import subprocess
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from memtrials.io import atomic_write_text


def server_dir(config: Mapping[str, Any]) -> Path:
    """The folder of a run's shared processes on each machine: beside the response cache."""
    return Path(config["cache"]["path"]).parent / "servers"


CLUSTER_VARIABLES: tuple[str, ...] = ("SLURM_JOB_ID", "KUBERNETES_SERVICE_HOST")


def cluster_job() -> str | None:
    """The variable that says this job runs under a cluster executor, or ``None``.

    There the fork servers and the job server stay off: Slurm ends every process of a job's
    cgroup with the job, so a server started by one job (and the children it forked for
    others) would die with it; a Kubernetes pod holds one job anyway."""
    return next((v for v in CLUSTER_VARIABLES if os.environ.get(v)), None)


def connect_abstract(address: str) -> socket.socket:
    """A stream connection to the Unix socket ``address`` in Linux's abstract namespace."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect("\0" + address)
    except OSError:
        sock.close()
        raise
    return sock


def listen_abstract(address: str) -> socket.socket:
    """A stream socket listening at ``address`` in Linux's abstract namespace (the server's end
    of :func:`connect_abstract`)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + address)
    listener.listen(64)
    return listener


def register_server(info: Path, address: str, name: str, warm_cpu: float, **extra: Any) -> None:
    """Write a fork server's ``info`` file, where jobs find it: this process, its socket
    ``address``, ``name``, host, warm-up CPU seconds and start time, and ``extra``'s fields."""
    atomic_write_text(info, json.dumps({"pid": os.getpid(), "address": address, "name": name,
                                        "host": socket.gethostname(), "warm_cpu_s": round(warm_cpu, 3),
                                        "started_at": time.time(), **extra}, sort_keys=True))


def may_fork(label: str, conn: socket.socket) -> bool:
    """Whether a fork server may fork a child for ``conn`` now: only while it runs one thread
    (a child gets no copy of the others, and a lock one of them held stays held); else it says
    so in its log (``label``) and closes ``conn``."""
    if threading.active_count() != 1:
        print(f"{label}: {threading.active_count()} threads, refusing to fork", flush=True)
        conn.close()
        return False
    return True


def peer_uid(conn: socket.socket) -> int | None:
    """The user id of the process on the other end of a Unix socket (``SO_PEERCRED``), or ``None``."""
    try:
        return struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))[1]
    except OSError:
        return None


def same_user(conn: socket.socket) -> bool:
    """Whether the peer of ``conn`` runs as this process's user.  The fork and job servers listen
    on abstract Unix sockets, which have no file permissions: any local user could connect, and
    what they send is unpickled, so a server serves only its own user."""
    return peer_uid(conn) == os.getuid()


_OPEN = open  # taken at import: AppWorld null-patches open while an action's code runs (forkserver)


def proc_stat(pid: int | str = "self") -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``[0]`` the state, ``[11]`` and
    ``[12]`` user and system clock ticks, ``[19]`` the start in ticks after boot), or ``None`` when
    the process is gone or the file unreadable (Linux only)."""
    try:
        with _OPEN(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields or None


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists (on this machine)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive ``fcntl`` lock on ``path`` (created, with its folder, if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_info(info: Path) -> dict[str, Any] | None:
    """The JSON of an info file, or ``None`` when it is missing or half-written."""
    try:
        return json.loads(info.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None


def live_leases(leases: Path) -> int:
    """Count the leases whose process is alive; drop the others."""
    n = 0
    for f in leases.glob("*"):
        try:
            pid = int(f.name.split("-", 1)[0])
        except ValueError:
            continue
        if alive(pid):
            n += 1
        else:
            f.unlink(missing_ok=True)
    return n


def _started(pid: int | str) -> str | None:
    """The start of process ``pid`` in clock ticks after boot (``None``: gone), which a
    recycled pid does not share."""
    fields = proc_stat(pid)
    return fields[19] if fields is not None and len(fields) > 19 else None


def _own_run(folder: Path) -> Path:
    """This process's run lease in ``folder``: ``runs/<host>-<pid>-<start>``."""
    return Path(folder) / "runs" / f"{socket.gethostname()}-{os.getpid()}-{_started('self')}"


def hold_run(folder: Path) -> Path | None:
    """Register this process (a workflow run's main process) as a run using the shared
    servers of ``folder`` on this host: ``runs/<host>-<pid>-<start>``.  :func:`release_run`
    takes it back at the run's end.  A folder that cannot be written (a reviewer's read-only
    copy of a cache, replayed) gives ``None`` and a warning, not a failed run: the lease only
    keeps another run's end from stopping servers this run uses."""
    lease = _own_run(folder)
    runs = lease.parent
    try:
        runs.mkdir(parents=True, exist_ok=True)
        lease.write_text(str(os.getpid()), encoding="utf-8")
    except OSError as exc:
        import logging

        logging.getLogger("memtrials").warning(
            f"{runs}: no run lease ({exc.strerror or exc}); another Snakemake run on this machine that ends "
            "first may stop the shared servers this run uses")
        return None
    return lease


def other_runs(folder: Path, own: Path | None = None) -> list[int]:
    """The pids of the other live runs on this host that hold ``folder``'s shared servers
    (a lease whose process is gone, or whose pid was recycled, is dropped)."""
    runs, host, pids = Path(folder) / "runs", socket.gethostname(), []
    for f in runs.glob(f"{host}-*"):
        if own is not None and f.name == own.name:
            continue
        try:
            name_host, pid_s, start = f.name.rsplit("-", 2)  # a host name may hold dashes; pid and start do not
            pid = int(pid_s)
        except ValueError:
            continue
        if name_host != host:  # another machine whose name starts like this one's ("vm" and "vm-2")
            continue
        if _started(pid) == start:
            pids.append(pid)
        else:
            f.unlink(missing_ok=True)
    return sorted(pids)


def release_run(folder: Path) -> list[int]:
    """Take back this process's run lease (:func:`hold_run`) and return the pids of the
    other live runs that still hold ``folder``'s servers: while there are any, the run's end
    must leave the shared servers running (they stop themselves once idle)."""
    own = _own_run(folder)
    try:
        own.unlink(missing_ok=True)
    except OSError:  # no lease was taken there (hold_run's warning)
        pass
    return other_runs(Path(folder), own)


class IdleClock:
    """How long a shared process has been without a client.

    ``expired(busy)`` is called on every poll with whether anything holds the process now;
    it is ``True`` once nothing has for ``idle_s`` seconds (monotonic clock).
    """

    def __init__(self, idle_s: float) -> None:
        self.idle_s = float(idle_s)
        self.since: float | None = None

    def expired(self, busy: bool) -> bool:
        if busy:
            self.since = None
            return False
        self.since = self.since or time.monotonic()
        return time.monotonic() - self.since >= self.idle_s

    def reset(self) -> None:
        self.since = None


def start_detached(cmd: Sequence[str], info: Path, log: Path, what: str, timeout_s: float, poll_s: float,
                   error: type[Exception]) -> dict[str, Any]:
    """Start ``cmd`` in its own session, output appended to ``log``, and wait until it has
    written ``info`` with its own pid (the caller holds the server's lock); ``error`` (naming
    ``what`` and the log) if it exits first or does not within ``timeout_s``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as logf:
        proc = subprocess.Popen(list(cmd), stdin=subprocess.DEVNULL, stdout=logf, stderr=logf,
                                start_new_session=True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = read_info(info)
        if found is not None and int(found.get("pid", -1)) == proc.pid:
            return found
        if proc.poll() is not None:
            raise error(f"{what} exited (code {proc.returncode}) while starting; see {log}")
        time.sleep(poll_s)
    proc.kill()
    raise error(f"{what} did not start within {timeout_s:.0f} s; see {log}")


def retire(listener: socket.socket, lock: Path, info: Path) -> bool:
    """Under ``lock``: ``False`` if a client is already waiting on ``listener`` (it keeps the
    server); else drop ``info`` if it is still this process's and close ``listener``: ``True``,
    and no client can join a leaving server."""
    with locked(lock):
        pending, _, _ = select.select([listener], [], [], 0)
        if pending:
            return False
        current = read_info(info)
        if current is not None and int(current.get("pid", -1)) == os.getpid():
            info.unlink(missing_ok=True)
        listener.close()
        return True


def watch_leases(leases: str, lock: str, info: str, idle_s: float, poll_s: float = 0.5) -> None:
    """In the server child: return once no live lease has existed for ``idle_s`` seconds.

    The decision to stop is taken under the lock, and the info file is removed before the
    lock is released, so a cell either joins before (its lease then keeps the server) or
    finds no server and starts a new one.
    """
    folder, clock = Path(leases), IdleClock(idle_s)
    while True:
        time.sleep(poll_s)
        if not clock.expired(live_leases(folder) > 0):
            continue
        with locked(Path(lock)):
            if live_leases(folder) > 0:
                clock.reset()
                continue
            current = read_info(Path(info))
            if current is not None and int(current.get("pid", -1)) == os.getpid():
                Path(info).unlink(missing_ok=True)
            return


def watch_in_thread(args: Any, on_exit: Any) -> None:
    """Start the child's watchdog: its parent (a per-cell server) or its leases (shared)."""
    def parent() -> None:
        while os.getppid() == args.parent:
            time.sleep(1.0)
        on_exit()

    def leases() -> None:
        watch_leases(args.leases, args.lock, args.info, args.idle)
        on_exit()

    target = leases if getattr(args, "leases", None) else parent
    threading.Thread(target=target, daemon=True).start()


def add_watch_arguments(parser: Any) -> None:
    """The child's watchdog options (one of ``--parent`` or ``--leases``/``--lock``/``--info``/``--idle``)."""
    parser.add_argument("--parent", type=int, default=None)
    parser.add_argument("--leases", default=None)
    parser.add_argument("--lock", default=None)
    parser.add_argument("--info", default=None)
    parser.add_argument("--idle", type=float, default=30.0)
