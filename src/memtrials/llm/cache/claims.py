"""Claims on cache keys as files, safe on a network filesystem (NFSv3+, no locks).

The shards backend of the response cache (:mod:`memtrials.llm.cache.shards`) cannot use
SQLite's locking across hosts, so a claim on a key is a file, ``<cache dir>/claims/<digest>``,
created exclusively: its content is written to a temporary file which is then hard-linked
to the claim's name (``link`` fails when the name exists; atomic at the server on NFSv2 and
later, on sshfs and on every local filesystem; when ``link`` reports the name taken, the
link count or the claim's own token tells a retransmitted request that succeeded; sshfs
reports a taken name as EPERM, not EEXIST, and the claim found there decides), so
exactly one process creates it and nobody ever sees it half written.  Its content names the owner (token,
host, pid) and the shard its reply will land in; while the call runs, the owner's
heartbeat thread refreshes the file's mtime every ``heartbeat_s``.

A claim goes through two states:

* ``live``: a call is out.  Another process waits.  The claim is *gone* (may be taken
  over) when its owner ran on this host and its pid no longer exists (a SIGKILLed job), or
  when its heartbeat is older than ``min(stale_s, lost_after_s)`` (an owner on another
  host that died).  Ages are measured against the filesystem's own clock (the mtime of a
  file this process just touched), not this host's, so clock skew between hosts does not
  count.  A take-over is decided by creating ``<digest>.gone-<old token>`` exclusively
  (one taker per claim generation), then renaming the taker's claim over the old one.
* ``stored``: the reply is in a shard; the file now points at it (shard name and byte
  offset).  It stays ``grace_s`` (120 s, longer than an NFS client's longest attribute
  and directory cache, ``acregmax`` / ``acdirmax`` = 60 s) so a process that has not yet
  seen the new shard or its new lines still finds the reply by the pointer; after that
  every reader's listing shows it, and the file is swept.  A pointer is proof that the
  reply was stored, so a process that cannot read it yet (its client still caches the
  shard's old size, as sshfs does for up to 20 s whatever the open) waits; it replaces the
  pointer only once it has stayed unreadable for ``lost_after_s`` (a shard deleted by hand).

State changes replace the file's content by a rename (atomic), never by rewriting it.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import socket
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from memtrials.machine import alive

GRACE_S = 120.0
HEARTBEAT_S = 5.0
LOST_AFTER_S = 60.0


def digest(key: str) -> str:
    """The file name of a key's claim (keys are already digests; this also bounds odd test keys)."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class ClaimBook:
    """The claims of one process (one :class:`~memtrials.llm.cache.shards.ShardCache`)."""

    def __init__(self, folder: Path, shard_name: str, *, heartbeat_s: float = HEARTBEAT_S,
                 lost_after_s: float = LOST_AFTER_S, grace_s: float = GRACE_S) -> None:
        self.folder = folder
        self.folder.mkdir(parents=True, exist_ok=True)
        self.shard_name = shard_name
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.heartbeat_s = heartbeat_s
        self.lost_after_s = lost_after_s
        self.grace_s = grace_s
        self._held: dict[str, str] = {}        # key -> token of this process's live claim
        self._stored: list[tuple[float, Path, str]] = []  # (monotonic time, claim file, token)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._clock = folder / f".clock.{self.host}.{self.pid}.{uuid.uuid4().hex[:8]}"

    # -- files ---------------------------------------------------------------
    def path(self, key: str) -> Path:
        return self.folder / digest(key)

    def read(self, key: str) -> tuple[dict[str, Any], float] | None:
        """The claim's content and mtime (an open revalidates both on NFS), or None."""
        try:
            with open(self.path(key), "rb") as fh:
                data, mtime = fh.read(), os.fstat(fh.fileno()).st_mtime
        except FileNotFoundError:
            return None
        try:
            return json.loads(data), mtime
        except json.JSONDecodeError:  # never so (claims appear whole: link, rename); wait on it by its mtime
            return {"state": "live", "token": "?", "host": "", "pid": 0}, mtime

    def _written(self, key: str, content: dict[str, Any]) -> Path:
        """``content`` in a fresh temporary file beside the claim.  Closed, not fsynced: an
        NFS client sends a file's data to the server by its close (close-to-open), which is
        all other hosts need; a claim lost to a server crash costs at most a second call."""
        tmp = self.folder / f".{digest(key)}.{uuid.uuid4().hex}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(content))
        return tmp

    def _replace(self, key: str, content: dict[str, Any]) -> None:
        os.replace(self._written(key, content), self.path(key))

    def _live(self, token: str, owner: str) -> dict[str, Any]:
        return {"state": "live", "token": token, "owner": owner, "host": self.host, "pid": self.pid,
                "shard": self.shard_name}

    def now(self) -> float:
        """The filesystem's clock: the mtime of a file this process has just touched."""
        with open(self._clock, "a"):
            pass
        os.utime(self._clock)
        return os.stat(self._clock).st_mtime

    def gone(self, content: dict[str, Any], mtime: float, stale_s: float) -> bool:
        """Whether a live claim's owner can no longer be waited for (module docstring)."""
        if content.get("host") == self.host and int(content.get("pid", 0)) != self.pid \
                and not alive(int(content.get("pid", 0))):
            return True
        return self.now() - mtime > min(stale_s, self.lost_after_s)

    # -- claiming ------------------------------------------------------------
    def owns(self, key: str) -> bool:
        with self._lock:
            token = self._held.get(key)
        if token is None:
            return False
        got = self.read(key)
        return got is not None and got[0].get("token") == token

    def try_claim(self, key: str, owner: str) -> bool | dict[str, Any]:
        """``True`` (claimed now), or the claim someone else holds (its content and, under
        ``"mtime"``, its heartbeat).  A claim released between the failed link and the read
        is tried for again, in a loop (churn by other holders costs tries, never the stack)."""
        refused = 0  # links refused as EPERM with no claim found under the name
        while True:
            token = uuid.uuid4().hex
            tmp = self._written(key, self._live(token, owner))
            taken_as_eperm = False
            try:
                # the claim appears with its content, exclusively: link() fails if the name
                # exists.  NFS may answer a retransmitted LINK that succeeded with EEXIST; the
                # classic recipe reads the link count then, but some network filesystems
                # (sshfs) report every link count as 1, so the claim's token decides as well
                try:
                    os.link(tmp, self.path(key))
                    won = True
                except FileExistsError:
                    won = os.stat(tmp).st_nlink == 2
                except PermissionError as exc:
                    # sshfs: OpenSSH's sftp-server answers a hard link onto an existing name with
                    # the generic SSH_FX_FAILURE, which sshfs turns into EPERM; the same errno
                    # from a filesystem without hard links is told apart below (no claim there)
                    if exc.errno != errno.EPERM:
                        raise
                    won, taken_as_eperm = False, True
            finally:
                tmp.unlink(missing_ok=True)
            if not won:
                got = self.read(key)
                if got is None:  # released between the link and the read: try again
                    if taken_as_eperm:
                        refused += 1
                        if refused > 3:
                            raise OSError(errno.EPERM, f"cannot create claim files by hard link in {self.folder} "
                                          "(link() refused and no claim holds the name): the shards cache "
                                          "needs a filesystem with hard links (NFS, sshfs, any local one)")
                    continue
                if got[0].get("token") != token:
                    return {**got[0], "mtime": got[1]}
            self.hold(key, token)
            return True

    def take_over(self, key: str, old_token: str, owner: str) -> bool:
        """Replace a gone claim by this process's (one taker per old claim; see module docstring)."""
        tomb = self.folder / f"{digest(key)}.gone-{old_token}"
        try:
            os.close(os.open(tomb, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        except FileExistsError:
            return False
        token = uuid.uuid4().hex
        self._replace(key, self._live(token, owner))
        got = self.read(key)
        if got is None or got[0].get("token") != token:
            return False
        self.hold(key, token)
        return True

    def hold(self, key: str, token: str) -> None:
        """Hold ``key``'s claim under ``token`` as this process's own (the heartbeat keeps it alive)."""
        with self._lock:
            self._held[key] = token
            if self._thread is None:
                self._thread = threading.Thread(target=self._beat, name="cache-claims-heartbeat", daemon=True)
                self._thread.start()

    def mark_stored(self, key: str, file: str, offset: int, run_id: str) -> None:
        """Turn this process's live claim into a pointer at the stored reply."""
        with self._lock:
            token = self._held.pop(key, None)
        if token is None:
            return
        self._replace(key, {"state": "stored", "token": token, "file": file, "offset": offset, "run": run_id})
        with self._lock:
            self._stored.append((time.monotonic(), self.path(key), token))
        self.expire()

    def release(self, key: str) -> None:
        """Give back a live claim of this process (its call failed)."""
        with self._lock:
            token = self._held.pop(key, None)
        if token is None:
            return
        got = self.read(key)
        if got is not None and got[0].get("token") == token:
            self.path(key).unlink(missing_ok=True)

    def expire(self, everything: bool = False) -> None:
        """Remove this process's stored pointers older than ``grace_s`` (all if ``everything``)."""
        limit = time.monotonic() - self.grace_s
        with self._lock:
            due = [s for s in self._stored if everything or s[0] < limit]
            self._stored = [s for s in self._stored if s not in due]
        for _, path, token in due:
            try:
                if json.loads(path.read_bytes()).get("token") == token:
                    path.unlink(missing_ok=True)
            except (FileNotFoundError, json.JSONDecodeError):
                pass

    def sweep(self) -> int:
        """Remove stored pointers, take-over marks and clock files older than ``grace_s``
        (any process's: a live process makes its clock file again when it needs it);
        returns how many."""
        now, removed = self.now(), 0
        for entry in os.scandir(self.folder):
            name = entry.name
            try:
                if now - entry.stat().st_mtime <= self.grace_s or name == self._clock.name:
                    continue
                if name.startswith(".clock.") or name.endswith(".tmp") and name.startswith("."):
                    os.unlink(entry.path)  # a clock, or a temporary file of a killed process
                    removed += 1
                    continue
                if name.startswith("."):
                    continue
                if ".gone-" in name or json.loads(Path(entry.path).read_bytes()).get("state") == "stored":
                    os.unlink(entry.path)
                    removed += 1
            except (FileNotFoundError, ValueError):
                continue
        return removed

    # -- heartbeat -----------------------------------------------------------
    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            with self._lock:
                keys = list(self._held)
            for key in keys:
                try:
                    os.utime(self.path(key))
                except FileNotFoundError:
                    pass

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.heartbeat_s + 1)
        self._clock.unlink(missing_ok=True)
