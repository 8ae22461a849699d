"""Reliability drill: the ``shards`` response cache on a real network filesystem.

SQLite's WAL is not safe when jobs on different hosts share a cache over a network
filesystem, so the cluster profiles use ``cache.backend: shards`` (README, "The response
cache across hosts").  Its tests run on a local disk; this drill runs it on a real one:
an **sshfs** (SFTP over FUSE) folder mounted several times, one mount per simulated host.
Each mount is its own SFTP client with its own attribute and directory caches (20 s by
default), serving the folder through its own ``sftp-server`` process; sshfs reports every
file's link count as 1 and offers no POSIX locks, so it is in some ways harsher than NFS.
Each cell runs in its own UTS namespace with its own host name (``unshare --uts``), so
the cache cannot tell a claim's owner is alive by its pid, as it could on one host.

1. The ``sqlite`` backend is refused on the mount, naming the fix.
2. Race: two cells on two "hosts" (mounts ``a``, ``b``) send the same N requests at the same
   moment to a loopback endpoint that samples (a new reply every call).  One paid call per
   key, both cells' records equal the stored replies, no claim left live.
3. Rerun: both cells again: no request reaches the endpoint and each cell's records file
   is byte-identical.
4. Kill -9: a cell on host ``a`` claims N new keys and is killed while its calls are out;
   a cell on host ``b`` sends the same requests, waits out the dead owner's heartbeat,
   takes every claim over and completes.
5. Compaction from a third host (mount ``c``) merges the finished shards; every entry is
   readable there and no key holds two replies.

Needs root (or FUSE for the user), ``/dev/fuse``, ``sshfs`` and OpenSSH's ``sftp-server``
(Debian: ``apt-get install sshfs openssh-sftp-server``; no SSH daemon is started: each
mount talks SFTP to its own ``sftp-server`` over a pipe) and ``unshare``.

    python benchmarks/drill_netfs.py [--keys N] [--keep]

The last line is the figure: ``netfs: ... ok=yes|no`` (exit 0 or 1); ``netfs: ran=no ...``
(exit 2) when a tool is missing (``missing`` counts them) or this machine refuses the mount
or the namespace (``missing=0``).  ``bin/setup-envs`` installs the tools;
``tests/test_drills.py`` runs the drill with 12 keys.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from drill_common import REPO, Checks, env

from memtrials.testing import Faults, LoopbackServer, loopback_endpoint

SFTP_SERVERS = ("/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/sftp-server")

CELL = """
import asyncio, json, sys, time
from pathlib import Path
from memtrials.llm import open_client
cfg, out, me, other, prompt, n = (json.load(open(sys.argv[1])), sys.argv[2], Path(sys.argv[3]), sys.argv[4],
                                  sys.argv[5], int(sys.argv[6]))
async def main():
    async with open_client(cfg, "netfs/" + Path(out).stem, out) as client:
        me.touch()
        deadline = time.monotonic() + 60
        while other != "-" and not Path(other).exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.002)  # a barrier: both cells send at once
        await asyncio.gather(*(client.complete("loop", [{"role": "user", "content": f"{prompt} {i}"}])
                               for i in range(n)))
        print(json.dumps({"fresh": client.fresh_calls, "hits": client.cache_hits}))
asyncio.run(main())
"""


def missing_tools() -> list[str]:
    out = []
    if not Path("/dev/fuse").exists():
        out.append("/dev/fuse (FUSE)")
    for tool in ("sshfs", "fusermount3", "unshare"):
        if shutil.which(tool) is None:
            out.append(tool)
    if sftp_server() is None:
        out.append("sftp-server (openssh-sftp-server)")
    return out


def sftp_server() -> str | None:
    return next((p for p in SFTP_SERVERS if os.access(p, os.X_OK)), None)


def mount(export: Path, where: Path, helper: Path) -> None:
    """Mount ``export`` at ``where`` through sshfs, its SFTP session served by ``helper``
    (started by sshfs in place of ``ssh``).  sshfs's own caches stay at their defaults."""
    where.mkdir(parents=True, exist_ok=True)
    subprocess.run(["sshfs", "-o", f"ssh_command={helper}", f"drill:{export}", str(where)],
                   check=True, capture_output=True, text=True, timeout=30)


def cannot_run(export: Path, probe: Path, helper: Path) -> str:
    """Why this machine cannot run the drill although the tools are installed (a mount or a
    UTS namespace refused: no FUSE or CAP_SYS_ADMIN for this user), or ''."""
    try:
        mount(export, probe, helper)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        return f"sshfs could not mount here: {(getattr(exc, 'stderr', '') or str(exc)).strip()[:300]}"
    unmount(probe)
    got = subprocess.run(as_host("probe", ["true"]), capture_output=True, text=True, timeout=30)
    if got.returncode != 0:
        return f"unshare --uts failed here: {got.stderr.strip()[:300]}"
    return ""


def unmount(where: Path) -> None:
    subprocess.run(["fusermount3", "-u", "-z", str(where)], capture_output=True, timeout=30)


def as_host(host: str, argv: list[str]) -> list[str]:
    """``argv`` run in a new UTS namespace whose host name is ``host``."""
    return ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', host, *argv]


class Drill:
    def __init__(self, work: Path, srv: LoopbackServer, n: int) -> None:
        self.work, self.srv, self.n = work, srv, n
        self.script = work / "cell.py"
        self.script.write_text(CELL)
        models = work / "models.yaml"
        models.write_text(yaml.safe_dump({"endpoints": {"loop": loopback_endpoint(srv, max_concurrency=64)}}))
        with open(REPO / "config" / "config.yaml") as fh:
            self.base = yaml.safe_load(fh)
        self.base.update(models_file=str(models), panel=["loop"])
        self.base["roles"] = {role: "loop" for role in (self.base.get("roles") or {})}

    def config(self, mnt: Path, name: str, **request) -> Path:
        """A cell's config: the cache (and so the records' journals) under mount ``mnt``."""
        cfg = json.loads(json.dumps(self.base))
        cfg["cache"] = {"path": str(mnt / "results" / "cache" / "llm.sqlite"), "mode": "use", "backend": "shards"}
        cfg["request"] = {"timeout_s": 5.0, "max_retries": 8, "backoff_base_s": 0.01, "backoff_max_s": 0.2, **request}
        path = self.work / f"{name}.json"
        path.write_text(json.dumps(cfg))
        return path

    def cell(self, host: str, cfg: Path, out: Path, tag: str, other: str, prompt: str) -> subprocess.Popen:
        argv = [sys.executable, str(self.script), str(cfg), str(out), str(self.work / f"{out.stem}.{tag}"),
                other, prompt, str(self.n)]
        return subprocess.Popen(as_host(host, argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env(), start_new_session=True)

    def race(self, mounts: dict[str, Path], tag: str, prompt: str) -> dict[str, dict]:
        procs = {}
        for name, other in (("a", "b"), ("b", "a")):
            (self.work / f"{name}.{tag}").unlink(missing_ok=True)
        for name, other in (("a", "b"), ("b", "a")):
            cfg = self.config(mounts[name], name)
            procs[name] = self.cell(f"host-{name}", cfg, self.work / f"{name}.parquet", tag,
                                    str(self.work / f"{other}.{tag}"), prompt)
        out = {}
        for name, proc in procs.items():
            stdout, stderr = proc.communicate(timeout=300)
            if proc.returncode != 0:
                raise SystemExit(f"cell {name} failed (rc {proc.returncode}):\n{stderr[-3000:]}")
            out[name] = json.loads(stdout.strip().splitlines()[-1])
        return out


def live_claims(folder: Path) -> int:
    if not folder.is_dir():
        return 0
    live = 0
    for f in folder.iterdir():
        if f.name.startswith(".") or ".gone-" in f.name:
            continue
        try:
            live += json.loads(f.read_text()).get("state") == "live"
        except (OSError, json.JSONDecodeError):
            live += 1
    return live


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", type=int, default=24, help="requests per cell (default 24)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder (mounts are always undone)")
    args = ap.parse_args()
    n = args.keys

    missing = missing_tools()
    if missing:
        print(f"drill_netfs: missing {', '.join(missing)}. Fix: apt-get install sshfs openssh-sftp-server "
              f"(and run where /dev/fuse exists, as root or with FUSE allowed)", file=sys.stderr)
        print(f"netfs: ran=no missing={len(missing)} ok=no")
        return 2

    from memtrials.llm.cache import filesystem_type, open_cache
    from memtrials.llm.cache.shards import ShardCache
    import pyarrow.parquet as pq

    work = Path(tempfile.mkdtemp(prefix="memtrials-netfs-"))
    export = work / "export"
    export.mkdir()
    helper = work / "sftp-helper"
    helper.write_text(f"#!/bin/sh\nexec {sftp_server()}\n")  # sshfs starts it in place of ssh; args ignored
    helper.chmod(0o755)
    mounts = {name: work / f"mnt-{name}" for name in "abc"}
    check = Checks()
    fig = check.fig
    not_here = cannot_run(export, work / "probe", helper)
    if not_here:
        shutil.rmtree(work, ignore_errors=True)
        print(f"drill_netfs: {not_here}", file=sys.stderr)
        print("netfs: ran=no missing=0 ok=no")
        return 2
    srv = LoopbackServer(policy={"sampled": 7}, faults=Faults(latency_s=1.0)).start()
    try:
        for name, where in mounts.items():
            mount(export, where, helper)
        kinds = {name: filesystem_type(where) for name, where in mounts.items()}
        print(f"mounts: {', '.join(f'{k}={v}' for k, v in kinds.items())} (one SFTP session each) on {export}")
        check(all(k == "fuse.sshfs" for k in kinds.values()), "every mount is fuse.sshfs")
        drill = Drill(work, srv, n)

        # 1. the sqlite backend refuses the network filesystem
        try:
            open_cache(mounts["a"] / "results" / "cache" / "llm.sqlite", backend="sqlite").close()
            refused = ""
        except ValueError as exc:
            refused = str(exc)
        print("1. sqlite backend on the mount:", refused[:160] + ("..." if len(refused) > 160 else ""))
        check("network filesystem" in refused and "cache.backend: shards" in refused,
              "sqlite refused on fuse.sshfs, naming cache.backend: shards")

        # 2. two hosts race on the same keys
        t0 = time.monotonic()
        counts = drill.race(mounts, "go", "step one of task")
        race_s = time.monotonic() - t0
        print(f"2. race: {counts} in {race_s:.1f} s; endpoint saw {srv.stats.completions} completions")
        check(srv.stats.completions == n, f"one paid call per key ({srv.stats.completions} for {n} keys)")
        check(counts["a"]["fresh"] + counts["b"]["fresh"] == n, "fresh calls of both cells add up to the keys")
        a = pq.read_table(work / "a.parquet").to_pylist()
        b = pq.read_table(work / "b.parquet").to_pylist()
        reader = ShardCache(mounts["c"] / "results" / "cache" / "llm.sqlite")
        stored = {r["call_id"]: r for r in reader.records()}
        reader.close()
        same = len(a) == len(b) == n and all({**x, "cell_id": ""} == {**y, "cell_id": ""} for x, y in zip(a, b))
        check(same, "both cells' records hold the same replies")
        check(all({**x, "cell_id": ""} == {**stored.get(x["call_id"], {}), "cell_id": ""} for x in a),
              "...and they are the stored ones (read from a third host)")
        check(len({r["response_text"] for r in a}) == n, "every key got its own sampled reply")
        journals = mounts["c"] / "results" / "records"
        jr = {name: sorted((json.loads(line) for line in (journals / f"netfs__{name}.jsonl").read_text().splitlines()),
                           key=lambda r: r["call_id"]) for name in "ab"}
        check(jr["a"] == a and jr["b"] == b, "each cell's journal on the mount equals its records")
        check(live_claims(export / "results" / "cache" / "claims") == 0, "no claim left live")
        fig["race_calls"] = f"{srv.stats.completions}/{n}"

        # 3. rerun: everything replayed, byte for byte
        before = {name: (work / f"{name}.parquet").read_bytes() for name in "ab"}
        srv.reset_stats()
        counts = drill.race(mounts, "again", "step one of task")
        print(f"3. rerun: {counts}; endpoint saw {srv.stats.requests} requests")
        check(srv.stats.requests == 0, "a rerun sends no request")
        check(all((work / f"{name}.parquet").read_bytes() == before[name] for name in "ab"),
              "a rerun's records are byte-identical")
        fig["rerun_requests"] = str(srv.stats.requests)

        # 4. kill -9 an owner on host a while its calls are out; host b takes over
        srv.reset_stats()
        srv.faults = Faults(latency_s=3.0)
        # a claim goes stale after about 28 s without a heartbeat (timeout x attempts): more than
        # sshfs's 20 s attribute cache, as it must be (README)
        quick = dict(timeout_s=14.0, max_retries=1, backoff_max_s=0.1)
        victim = drill.cell("host-a", drill.config(mounts["a"], "ka", **quick), work / "ka.parquet", "kill", "-",
                            "step two of task")
        deadline = time.monotonic() + 60
        while srv.stats.requests < n and time.monotonic() < deadline and victim.poll() is None:
            time.sleep(0.05)
        os.killpg(victim.pid, signal.SIGKILL)
        victim.wait()
        sent_by_victim = srv.stats.requests
        t0 = time.monotonic()
        taker = drill.cell("host-b", drill.config(mounts["b"], "kb", **quick), work / "kb.parquet", "kill", "-",
                           "step two of task")
        stdout, stderr = taker.communicate(timeout=300)
        took_s = time.monotonic() - t0
        ok = taker.returncode == 0
        print(f"4. kill -9: host a had {sent_by_victim} calls out; host b finished in {took_s:.1f} s "
              f"(rc {taker.returncode}), endpoint saw {srv.stats.requests - sent_by_victim} more")
        check(sent_by_victim == n, "the killed cell had every call out when killed")
        check(ok, "the cell on host b completed" + ("" if ok else f": {stderr[-800:]}"))
        check(ok and len(pq.read_table(work / "kb.parquet")) == n, "...with a record for every request")
        check(srv.stats.requests - sent_by_victim == n, "host b paid each dead claim once")
        fig["takeover_s"] = f"{took_s:.1f}"

        # 5. compaction on a third host, then every entry readable there
        cache = ShardCache(mounts["c"] / "results" / "cache" / "llm.sqlite")
        counts_c = cache.compact()
        cache.close()
        cache = ShardCache(mounts["c"] / "results" / "cache" / "llm.sqlite")
        entries, dups = len(cache.records()), cache.duplicates()
        cache.close()
        print(f"5. compaction on host c: {counts_c}; then {entries} entries, {dups} duplicates")
        check(entries == 2 * n, f"every entry readable after compaction ({entries} of {2 * n})")
        check(dups == 0, "no key holds two replies")
        fig["entries"] = f"{entries}/{2 * n}"
        fig["duplicates"] = str(dups)
    finally:
        srv.stop()
        for where in mounts.values():
            unmount(where)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"kept {work}")
    return check.figure(f"netfs: fs=fuse.sshfs hosts=3 keys={n}")


if __name__ == "__main__":
    sys.exit(main())
