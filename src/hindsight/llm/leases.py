"""Leases on a shared server, and the watchdog that ends a server child.

A shared embedded server (:mod:`hindsight.llm.shared`) is held by one lease file per
client process; its child runs :func:`watch_in_thread`, which ends it when its parent is
gone (a per-cell server) or when no live lease has existed for ``idle`` seconds (a shared
one).  This module imports nothing of the model layer, so the servers and the sharing
logic can both use it; the lock, info-file and lease helpers themselves live in
:mod:`hindsight.leases` (shared with the environment fork servers) and are re-exported here.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from hindsight.leases import IdleClock, alive, live_leases, locked, read_info

__all__ = ["alive", "locked", "read_info", "live_leases", "watch_leases", "watch_in_thread",
           "add_watch_arguments"]


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
