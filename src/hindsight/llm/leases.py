"""Leases on a shared server, and the watchdog that ends a server child.

A shared embedded server (:mod:`hindsight.llm.shared`) is held by one lease file per
client process; its child runs :func:`watch_in_thread`, which ends it when its parent is
gone (a per-cell server) or when no live lease has existed for ``idle`` seconds (a shared
one).  This module imports nothing of the model layer, so the servers and the sharing
logic can both use it.
"""

from __future__ import annotations

import fcntl
import json
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@contextmanager
def locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def read_info(info: Path) -> dict[str, Any] | None:
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


def watch_leases(leases: str, lock: str, info: str, idle_s: float, poll_s: float = 0.5) -> None:
    """In the server child: return once no live lease has existed for ``idle_s`` seconds.

    The decision to stop is taken under the lock, and the info file is removed before the
    lock is released, so a cell either joins before (its lease then keeps the server) or
    finds no server and starts a new one.
    """
    folder, idle_since = Path(leases), None
    while True:
        time.sleep(poll_s)
        if live_leases(folder) > 0:
            idle_since = None
            continue
        idle_since = idle_since or time.monotonic()
        if time.monotonic() - idle_since < idle_s:
            continue
        with locked(Path(lock)):
            if live_leases(folder) > 0:
                idle_since = None
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
