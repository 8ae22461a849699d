"""The disk memo of TextWorld's SAS translations (the TextWorld memo's ``disk_sas`` part).

A part of :mod:`memtrials.envs.alfworld.speed`, switched by ``MEMTRIALS_TEXTWORLD_DISK_SAS``.
The translations persist on disk, one pickle per (domain, problem, ``optimize``) under
:func:`sas_dir` (``$MEMTRIALS_TEXTWORLD_SAS_DIR``, else ``<venv>/share/memtrials/textworld-sas``;
an empty value switches it off), named by the SHA-256 of the inputs, the pinned versions and
:data:`DISK_FORMAT`.  The in-memory memo is per process, and an environment fork child is a new
process per episode, so every episode on a game the child had not seen paid the translation
again: about 0.2 CPU-s of a new game's 0.25 (measured on 13 default games: 2.9 of 3.6 CPU-s),
some 45 CPU-s of a fully cached rerun of the default run.  Reading the pickle takes about 1 ms
(0.18 MB).  Written to a temporary file and renamed, so a reader never sees half a file; an
unreadable or corrupt file is translated again and replaced; a folder that cannot be written
leaves the memo in memory only.  The translator's output is a function of its inputs (see
:mod:`memtrials.envs.alfworld.speed`), and ``PddlState`` reads the task's actions, types,
objects and initial facts, which pickling keeps whole (shared references included).

The folder is kept under a size cap (``$MEMTRIALS_TEXTWORLD_SAS_MAX_MB``, default
:data:`SAS_MAX_MB_DEFAULT`; 0 keeps nothing): a hit marks its file used (its modification
time), and after each write the least recently used files go until the folder is under
nine tenths of the cap (about 0.3 MB a game: the default run's games take some 100 MB, the
paper's whole ALFWorld set about 1.1 GB).
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Mapping

log = logging.getLogger("memtrials.envs.alfworld.speed")  # the memo's logger, as its messages say

SAS_DIR = "MEMTRIALS_TEXTWORLD_SAS_DIR"
SAS_MAX_MB = "MEMTRIALS_TEXTWORLD_SAS_MAX_MB"
SAS_MAX_MB_DEFAULT = 2048
DISK_FORMAT = 1
"""Part of every disk entry's name: bump it when what is stored changes."""

counts = {"hits": 0, "misses": 0, "errors": 0, "pruned": 0}
"""This process's disk-memo ``hits``, ``misses``, ``errors`` and ``pruned`` files."""
_warned_cap: list[bool] = []


def sas_dir() -> Path | None:
    """Where the ``disk_sas`` part keeps translations (module docstring); None when switched off."""
    env = os.environ.get(SAS_DIR)
    if env is not None:
        return Path(env) if env.strip() else None
    return Path(sys.prefix) / "share" / "memtrials" / "textworld-sas"


def translate(folder: Path, domain: str, problem: str, optimize: bool, pins: Mapping[str, str],
              make: Callable[..., Any]) -> Any:
    """The translation of (domain, problem) read from ``folder``, else made by ``make`` (the
    translator, called as ``make(domain, problem, optimize=optimize)``) and stored there;
    ``pins`` (the memo's pinned versions) are part of the entry's name."""
    key = hashlib.sha256(repr((DISK_FORMAT, sorted(pins.items()), sys.version_info[:2], bool(optimize),
                               domain, problem)).encode()).hexdigest()
    path = folder / f"{key[:32]}.pickle"
    try:
        with open(path, "rb") as fh:
            value = pickle.load(fh)
        counts["hits"] += 1
        try:
            os.utime(path)  # used now: the pruning keeps it over older ones
        except OSError:
            pass
        return value
    except FileNotFoundError:
        pass
    except Exception as exc:  # a corrupt or foreign file: translate again and replace it
        counts["errors"] += 1
        log.warning("memtrials.envs.alfworld.speed: unreadable translation %s (%s); translating again", path, exc)
    counts["misses"] += 1
    value = make(domain, problem, optimize=optimize)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
    except OSError as exc:
        counts["errors"] += 1
        log.debug("memtrials.envs.alfworld.speed: translation not stored in %s (%s)", folder, exc)
    else:
        counts["pruned"] += prune_sas_dir(folder, sas_max_bytes())
    return value


def sas_max_bytes() -> int:
    """The disk memo's size cap in bytes (``$MEMTRIALS_TEXTWORLD_SAS_MAX_MB``; a value that is not a
    number of megabytes >= 0 is reported once and the default used)."""
    raw = os.environ.get(SAS_MAX_MB)
    mb: float = SAS_MAX_MB_DEFAULT
    if raw is not None and raw.strip():
        try:
            mb = float(raw)
            if not mb >= 0:
                raise ValueError
        except ValueError:
            mb = SAS_MAX_MB_DEFAULT
            if not _warned_cap:
                _warned_cap.append(True)
                log.warning("memtrials.envs.alfworld.speed: %s=%r is not a size in megabytes (a number >= 0); "
                            "using %d", SAS_MAX_MB, raw, SAS_MAX_MB_DEFAULT)
    return int(mb * 1024 * 1024)


def prune_sas_dir(folder: Path, max_bytes: int) -> int:
    """Delete the least recently used translations in ``folder`` until it holds at most nine tenths
    of ``max_bytes`` (nothing while it is within ``max_bytes``); how many were deleted.  Safe beside
    other processes: a reader of a deleted file translates again, a file gone already is skipped."""
    entries = []
    total = 0
    try:
        with os.scandir(folder) as it:
            for e in it:
                if not e.name.endswith(".pickle") or e.name.startswith("."):
                    continue
                try:
                    st = e.stat()
                except OSError:
                    continue
                entries.append((st.st_mtime_ns, e.name, st.st_size))
                total += st.st_size
    except OSError:
        return 0
    if total <= max_bytes:
        return 0
    goal = max_bytes * 9 // 10
    removed = 0
    for _, name, size in sorted(entries):
        if total <= goal:
            break
        try:
            (folder / name).unlink()
            removed += 1
        except FileNotFoundError:
            pass
        except OSError:
            continue
        total -= size
    return removed
