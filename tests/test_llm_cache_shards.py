"""The shards backend of the response cache (``cache.backend: shards``, for jobs on several hosts).

Writers are separate processes (as Snakemake jobs on cluster nodes are) sharing one cache
folder: every entry is readable by all, none is lost or torn, a key stored by several at
once keeps one reply that all of them go on with.  Claims are files: a killed claimant's is
taken over at once on its host, another host's once its heartbeat stops; a reader whose
view of the folder is stale (an NFS client's attribute and directory caches) finds a fresh
reply through the claim's pointer instead of calling again.  Compaction keeps every reply
and ledger row.  The client-level race (two processes, one paid call per key, identical
records) runs on both backends in tests/test_llm_race.py.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

from memtrials.__main__ import main as cli
from memtrials.llm.cache import open_cache
from memtrials.llm.cache.claims import digest
from memtrials.llm.cache.shards import ShardCache
from tests.conftest import dead_pid

PROCS, OWN, SHARED = 4, 36, 12
WRITER = """
import json, sys, time
from pathlib import Path
from memtrials.llm.cache.shards import ShardCache
path, me, folder = sys.argv[1], sys.argv[2], Path(sys.argv[3])
own, shared, procs = {own}, {shared}, {procs}
def rec(key, text):
    return {{"call_id": key[:24], "endpoint": "e", "cell_id": me, "prompt_tokens": 3, "completion_tokens": 2,
            "cost": 0.25, "finished_at": "t", "response_text": text}}
cache = ShardCache(path)
(folder / f"ready.{{me}}").touch()
while len(list(folder.glob("ready.*"))) < procs:
    time.sleep(0.002)
got, seen = {{}}, 0
for i in range(own):
    big = "x" * (70000 if i % 9 == 0 else 10)  # a line longer than one write to a pipe or an NFS block
    cache.store(f"{{me}}-{{i}}", rec(f"{{me}}-{{i}}", f"{{me}}:{{i}}:{{big}}"), "run")
    if i % 3 == 0:  # shared keys, sent by every writer at about the same moment
        j = i // 3
        got[j] = cache.store_many([(f"shared-{{j}}", rec(f"shared-{{j}}", f"{{me}} wrote {{j}}"))], "run")[
            f"shared-{{j}}"]["response_text"]
    seen += sum(cache.get(f"w{{k}}-{{i // 2}}") is not None for k in range(procs))  # others' lines, mid-write
cache.close()
(folder / f"done.{{me}}").touch()
while len(list(folder.glob("done.*"))) < procs:
    time.sleep(0.01)
reader = ShardCache(path)
everyone = [f"w{{k}}-{{i}}" for k in range(procs) for i in range(own)] + [f"shared-{{j}}" for j in range(shared)]
found = reader.get_many(everyone)
print(json.dumps({{"got": got, "found": len(found), "texts_ok": all(
    r["response_text"].startswith(k.split("-")[0] + ":") for k, r in found.items() if k.startswith("w")),
    "shared": {{k: r["response_text"] for k, r in found.items() if k.startswith("shared")}}, "seen": seen}}))
reader.close()
""".format(own=OWN, shared=SHARED, procs=PROCS)


def _record(key: str, text: str, cell: str = "c") -> dict:
    return {"call_id": key[:24].ljust(24, "0"), "endpoint": "e", "cell_id": cell, "prompt_tokens": 1,
            "completion_tokens": 1, "cost": 0.5, "finished_at": "t", "response_text": text}


def _lines(folder: Path) -> list[dict]:
    out = []
    for shard in sorted((folder / "shards").glob("*.jsonl")):
        data = shard.read_bytes()
        assert data.endswith(b"\n"), f"{shard.name}: a torn last line"
        out += [json.loads(line) for line in data.splitlines()]
    return out


def test_concurrent_writers_in_separate_processes_lose_nothing(tmp_path):
    path = tmp_path / "cache" / "llm.sqlite"
    (tmp_path / "caller.py").write_text(WRITER)
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "caller.py"), str(path), f"w{k}", str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for k in range(PROCS)]
    reports = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        reports.append(json.loads(out.strip().splitlines()[-1]))

    total = PROCS * OWN + SHARED
    for rep in reports:  # every writer reads every entry, its own and the others'
        assert rep["found"] == total and rep["texts_ok"]
    # a shared key stored by every writer at once has one reply, and each writer went on with it
    shared = reports[0]["shared"]
    assert len(shared) == SHARED and all(rep["shared"] == shared for rep in reports)
    for rep in reports:
        assert {f"shared-{j}": text for j, text in rep["got"].items()} == shared

    cache = ShardCache(path)
    assert len(cache.records()) == total and cache.duplicates() == 0
    assert cache.totals() == [("e", PROCS * (OWN + SHARED), 3 * PROCS * (OWN + SHARED),
                               2 * PROCS * (OWN + SHARED), pytest.approx(0.25 * PROCS * (OWN + SHARED)))]
    lines = _lines(path.parent)  # no torn line; one reply line per key; the ledger counts every paid call
    assert sum(line["t"] == "r" for line in lines) == total
    assert sum(line["t"] == "l" for line in lines) == PROCS * (OWN + SHARED)
    assert sum(line["t"] == "end" for line in lines) == PROCS  # each writer closed its shard (a reader has none)
    # no live claim is left; the stored pointers expire
    claims = [json.loads(f.read_text()) for f in (path.parent / "claims").iterdir()
              if not f.name.startswith(".") and ".gone-" not in f.name]
    assert claims and all(c["state"] == "stored" for c in claims)
    cache.close()


HOLDER = """
import json, socket, sys, time
host, options = sys.argv[2], json.loads(sys.argv[3])
if host:
    socket.gethostname = lambda: host  # as a job on another host of the cluster
from memtrials.llm.cache.shards import ShardCache
cache = ShardCache(sys.argv[1], **options)
assert cache.claim("k", "holder", 3600) is True
print("claimed", flush=True)
time.sleep(120)
"""


@contextmanager
def claim_held(path: Path, host: str = "", **options: float) -> Iterator[None]:
    """A process of its own holds the claim on key "k" (on host ``host`` when it names one;
    ``options``: its ShardCache's) until the block ends: then it is killed (SIGKILL)."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), host, json.dumps(options)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "claimed"
        yield
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)


def test_a_killed_claimants_claim_is_taken_over(tmp_path):
    path = tmp_path / "llm.sqlite"
    with claim_held(path):
        waiter = ShardCache(path)
        assert waiter.claim("k", "waiter", stale_s=3600) is False  # a live owner on this host: wait
    assert waiter.claim("k", "waiter", stale_s=3600) is True  # its process is gone: taken over at once
    assert waiter.store("k", _record("k", "after the kill"), "run")["response_text"] == "after the kill"
    other = ShardCache(path)
    assert other.claim("k", "third", 3600)["response_text"] == "after the kill"
    waiter.close()
    other.close()


def test_claims_wait_for_a_live_owner_and_take_over_a_silent_one(tmp_path):
    path = tmp_path / "llm.sqlite"
    a = ShardCache(path, heartbeat_s=0.05)
    b = ShardCache(path, lost_after_s=0.6)
    assert a.claim("k", "a", stale_s=60) is True
    assert a.claim("k", "a", stale_s=60) is True       # its owner may claim again (a retry)
    assert b.claim("k", "b", stale_s=60) is False      # a live owner: wait
    time.sleep(1.0)
    assert b.claim("k", "b", stale_s=60) is False      # its heartbeat keeps the claim
    a.claims._stop.set()                               # the owner's heartbeat stops (its host died)
    time.sleep(1.0)
    assert b.claim("k", "b", stale_s=60) is True       # taken over
    assert b.claim("k", "c", stale_s=60) is False      # by exactly one taker
    b.store("k", _record("k", "b's"), "run")
    assert a.claim("k", "a", 60)["response_text"] == "b's"
    # a failed call gives its claim back
    assert b.claim("f", "b", 60) is True
    b.release("f", "b")
    assert a.claim("f", "a", 60) is True
    # an owner on another host: waited for while its heartbeat is fresh, taken over once it is old
    claim = b.claims.path("h")
    claim.write_text(json.dumps({"state": "live", "token": "t", "owner": "far", "host": "other-host", "pid": 1,
                                 "shard": "x.jsonl"}))
    assert b.claim("h", "b", stale_s=3600) is False
    os.utime(claim, (time.time() - 7200, time.time() - 7200))
    assert b.claim("h", "b", stale_s=3600) is True
    # modes that do not read the cache do not claim
    off = ShardCache(tmp_path / "o" / "llm.sqlite", mode="off")
    assert off.claim("k", "a", 60) is True and off.claim("k", "b", 60) is True
    for c in (a, b, off):
        c.close()


def test_a_reader_with_a_stale_view_finds_a_fresh_reply_through_the_claim(tmp_path):
    path = tmp_path / "llm.sqlite"
    late = ShardCache(path, refresh_s=1e9)  # never looks at the folder again by itself, as a stale NFS view
    assert late.get("k") is None
    writer = ShardCache(path)
    assert writer.claim("k", "w", 60) is True
    writer.store("k", _record("k", "fresh"), "run")
    assert late.get("k") is None                                   # its index has not seen the new shard
    assert late.claim("k", "late", 60)["response_text"] == "fresh"  # the claim points at the reply
    # once the pointer has expired (grace_s), the claim succeeds and a forced look finds the reply
    quick = ShardCache(path, grace_s=0.0)
    assert quick.claim("q", "w", 60) is True
    quick.store("q", _record("q", "fresh q"), "run")
    assert not quick.claims.path("q").exists()
    assert late.claim("q", "late", 60)["response_text"] == "fresh q"
    assert not late.claims.path("q").exists()  # its own momentary claim is given back
    for c in (late, writer, quick):
        c.close()


def test_a_pointer_this_host_cannot_read_yet_is_waited_for_not_replaced(tmp_path, monkeypatch):
    """A network filesystem client may go on serving a shard's old size (sshfs does for up to
    20 s): the stored pointer then names bytes this reader cannot see yet.  The reader waits
    (no second paid call, no second reply); only a pointer unreadable for lost_after_s (a shard
    deleted by hand) is replaced.  benchmarks/drill_netfs.py runs this on a real sshfs mount."""
    path = tmp_path / "llm.sqlite"
    writer = ShardCache(path)
    assert writer.claim("k", "w", 60) is True
    writer.store("k", _record("k", "first"), "run")
    reader = ShardCache(path, lost_after_s=0.5, refresh_s=1e9)
    real_line = reader.index.line

    def stale_line(file, offset):  # as a client whose cached size ends before the pointed line
        return json.loads(b"")

    monkeypatch.setattr(reader.index, "line", stale_line)
    monkeypatch.setattr(reader.index, "refresh", lambda force=False: None)
    assert reader.claim("k", "r", 60) is False        # stored but not visible here: wait, do not call
    # storing a reply of its own meanwhile waits too, and goes on with the stored one once visible
    threading.Timer(0.2, setattr, (reader.index, "line", real_line)).start()
    assert reader.store("k", _record("k", "second"), "run")["response_text"] == "first"
    assert reader.claim("k", "r", 60)["response_text"] == "first"
    assert not reader._unseen  # a pointer read at last is no longer waited for (nothing kept per key)
    monkeypatch.setattr(reader.index, "line", real_line)

    # a pointer at bytes that never appear is replaced, but only after lost_after_s
    assert writer.claim("g", "w", 60) is True
    writer.store("g", _record("g", "lost"), "run")
    (path.parent / "shards" / writer.name).write_bytes(b"")  # the shard emptied by hand
    monkeypatch.setattr(reader.index, "line", stale_line)
    t0 = time.monotonic()
    assert reader.claim("g", "r", 60) is False
    while (got := reader.claim("g", "r", 60)) is False:
        time.sleep(0.05)
    assert got is True and time.monotonic() - t0 >= 0.5
    assert not reader._unseen  # nor one replaced
    writer.close()
    reader.close()


def test_a_link_that_reports_the_name_taken_is_won_by_its_token(tmp_path, monkeypatch):
    """NFS may answer a retransmitted LINK that succeeded with EEXIST, and sshfs reports every
    link count as 1: the claim whose content carries this process's token is its own."""
    from memtrials.llm.cache import claims as cache_claims

    book = cache_claims.ClaimBook(tmp_path / "claims", "s.jsonl")
    real_link = os.link

    def link_then_eexist(src, dst):
        real_link(src, dst)
        raise FileExistsError(17, "File exists")

    real_stat = os.stat

    def stat_as_sshfs(path, *args, **kw):  # every link count reads 1
        st = real_stat(path, *args, **kw)
        return os.stat_result((st.st_mode, st.st_ino, st.st_dev, 1, st.st_uid, st.st_gid, st.st_size,
                               int(st.st_atime), int(st.st_mtime), int(st.st_ctime)))

    monkeypatch.setattr(cache_claims.os, "link", link_then_eexist)
    monkeypatch.setattr(cache_claims.os, "stat", stat_as_sshfs)
    assert book.try_claim("k", "me") is True and book.owns("k")
    other = cache_claims.ClaimBook(tmp_path / "claims", "t.jsonl")
    monkeypatch.setattr(cache_claims.os, "link", real_link)
    got = other.try_claim("k", "you")  # the name is taken (link count 1 here too): not won
    assert isinstance(got, dict) and got["owner"] == "me"
    book.close()
    other.close()


def test_a_link_refused_as_eperm_onto_a_taken_name_loses_to_the_holder(tmp_path, monkeypatch):
    """On sshfs a hard link onto an existing name fails with EPERM, not EEXIST (sftp-server's
    generic failure status): that is a lost race, not an error; EPERM with no claim there
    (a filesystem without hard links) is an error that says so."""
    from memtrials.llm.cache import claims as cache_claims

    holder = cache_claims.ClaimBook(tmp_path / "claims", "s.jsonl")
    assert holder.try_claim("k", "me") is True
    real_link = os.link

    def link_as_sshfs(src, dst):
        try:
            real_link(src, dst)
        except FileExistsError:
            raise PermissionError(errno.EPERM, "Operation not permitted") from None

    monkeypatch.setattr(cache_claims.os, "link", link_as_sshfs)
    other = cache_claims.ClaimBook(tmp_path / "claims", "t.jsonl")
    got = other.try_claim("k", "you")
    assert isinstance(got, dict) and got["owner"] == "me" and not other.owns("k")

    def no_hard_links(src, dst):
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(cache_claims.os, "link", no_hard_links)
    with pytest.raises(OSError, match="needs a filesystem with hard links"):
        other.try_claim("k2", "you")
    holder.close()
    other.close()


def test_a_claim_name_that_churns_past_the_recursion_limit_is_claimed_in_a_loop(tmp_path, monkeypatch):
    """Other holders taking and giving back the name between this process's link and read,
    more times than Python's recursion limit: the claimer keeps trying (no RecursionError)
    and claims the name once it is free."""
    from memtrials.llm.cache import claims as cache_claims

    real_link = os.link
    churn = sys.getrecursionlimit() + 50
    seen = {"n": 0}

    def busy_then_free(src, dst):
        seen["n"] += 1
        if seen["n"] <= churn:  # someone held the name; it is gone again by the read
            raise FileExistsError(errno.EEXIST, "File exists")
        return real_link(src, dst)

    monkeypatch.setattr(cache_claims.os, "link", busy_then_free)
    book = cache_claims.ClaimBook(tmp_path / "claims", "t.jsonl")
    assert book.try_claim("k", "me") is True and book.owns("k")
    assert seen["n"] == churn + 1
    assert not list((tmp_path / "claims").glob(".*.tmp"))  # every temporary claim file removed
    book.close()


def test_torn_lines_are_never_read_and_compaction_keeps_every_reply(tmp_path, capsys):
    path = tmp_path / "results" / "cache" / "llm.sqlite"
    a, b = ShardCache(path), ShardCache(path, "refresh")
    a.store("k1", _record("k1", "a1"), "run-1")
    a.store("k2", _record("k2", "a2"), "run-1")
    b.store("k2", _record("k2", "b2"), "run-2")  # a refresh run replaces k2
    a.close()
    b.close()
    # a killed writer on this host: a complete line and a torn one (no newline)
    dead = dead_pid(2 ** 22 + 4321)
    killed = path.parent / "shards" / f"{socket.gethostname()}__{dead}__dead.jsonl"
    good = {"t": "r", "k": "k3", "run": "run-1", "at": time.time(), "ref": False, "n": 0,
            "rec": _record("k3", "from the killed one")}
    killed.write_bytes(json.dumps(good).encode() + b"\nnot a json line\n" + b'{"t": "r", "k": "k4", "run": "ru')
    reader = ShardCache(path)
    before = {r["call_id"]: r["response_text"] for r in reader.records()}
    assert sorted(before.values()) == ["a1", "b2", "from the killed one"]
    assert reader.get("k4") is None and reader.spent() == 1.5 and reader.unreadable == 1
    # a live writer's shard is not merged
    live = ShardCache(path)
    live.store("k5", _record("k5", "live"), "run-3")
    assert cli(["cache", "compact", *_overlay(tmp_path, path)]) == 0
    assert "sources 3" in capsys.readouterr().out
    shards = path.parent / "shards"
    names = sorted(p.name for p in shards.iterdir() if not p.name.startswith("."))
    assert len(names) == 2 and names[0].startswith("compacted-") and names[0].endswith(".sqlite")
    assert names[1] == live.name
    after = ShardCache(path)
    everything = {**before, "k5".ljust(24, "0"): "live"}
    assert {r["call_id"]: r["response_text"] for r in after.records()} == everything
    assert after.spent() == 2.0 and after.duplicates() == 0 and after.index.shards().keys() == {live.name}
    assert reader.get("k2")["response_text"] == "b2"  # an open reader follows the compaction
    assert after.totals() == [("e", 4, 4, 4, 2.0)]
    assert cli(["spend", *_overlay(tmp_path, path)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == ["e", "4", "4", "4", "2.0000"]
    # a second compaction merges the base and the now closed shard into a new base
    live.close()
    assert cli(["cache", "compact", *_overlay(tmp_path, path)]) == 0
    assert "sources 2" in capsys.readouterr().out
    (base,) = [p for p in shards.iterdir() if not p.name.startswith(".")]
    assert base.suffix == ".sqlite" and base.name != names[0]
    again = ShardCache(path)
    assert {r["call_id"]: r["response_text"] for r in again.records()} == everything
    assert again.spent() == 2.0 and again.totals() == after.totals() and again.duplicates() == 0
    assert again.get("k2")["response_text"] == "b2" and reader.get("k5")["response_text"] == "live"
    # a refresh run after compaction still replaces the base's reply
    fresh = ShardCache(path, "refresh")
    fresh.store("k1", _record("k1", "a1 again"), "run-4")
    fresh.close()
    assert ShardCache(path).get("k1")["response_text"] == "a1 again"
    for c in (reader, after, again):
        c.close()


def _overlay(tmp_path: Path, cache_path: Path) -> list[str]:
    """``--config`` / ``--configfile`` arguments: the defaults plus an overlay moving the cache."""
    import yaml

    from tests.conftest import REPO

    out = tmp_path / "cluster.yaml"
    out.write_text(yaml.safe_dump({"cache": {"path": str(cache_path), "backend": "shards"}}))
    return ["--config", str(REPO / "config/config.yaml"), "--configfile", str(out)]


def test_open_cache_names_the_backends(tmp_path):
    assert isinstance(open_cache(tmp_path / "llm.sqlite", backend="shards"), ShardCache)
    with pytest.raises(ValueError, match="cache.backend must be one of sqlite, shards, not 'nfs'"):
        open_cache(tmp_path / "llm.sqlite", backend="nfs")
    assert len(digest("k")) == 64


MOUNTINFO = """\
22 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw
40 22 0:40 / /mnt/shared rw,relatime - nfs4 server:/export rw,vers=4.2
41 40 8:2 / /mnt/shared/local\\040disk rw - xfs /dev/sdb1 rw
"""


def test_sqlite_refuses_a_network_filesystem(tmp_path, monkeypatch):
    import memtrials.llm.cache.sqlite as cache_module

    info = tmp_path / "mountinfo"
    info.write_text(MOUNTINFO)
    assert cache_module.filesystem_type("/mnt/shared/results/cache", str(info)) == "nfs4"
    assert cache_module.filesystem_type("/mnt/shared/local disk/cache", str(info)) == "xfs"
    assert cache_module.filesystem_type("/home/me", str(info)) == "ext4"
    assert cache_module.filesystem_type("/x", str(tmp_path / "absent")) is None
    monkeypatch.setattr(cache_module, "filesystem_type", lambda path: "nfs4")
    with pytest.raises(ValueError, match=r"network filesystem \(nfs4\).*Fix: set cache.backend: shards"):
        open_cache(tmp_path / "llm.sqlite")
    open_cache(tmp_path / "llm.sqlite", backend="shards").close()  # the shards backend is made for it


@pytest.mark.parametrize("profile", ["slurm", "kubernetes"])
def test_the_cluster_profiles_select_the_shards_backend(profile, tmp_path):
    """Snakemake merges the profile's ``config`` entry into the config key by key (a tiny
    workflow prints what its jobs would see)."""
    from tests.conftest import REPO

    (tmp_path / "base.yaml").write_text("cache: {path: results/cache/llm.sqlite, mode: use, backend: sqlite}\n")
    (tmp_path / "Snakefile").write_text('import json\nconfigfile: "base.yaml"\nprint("CACHE", json.dumps(config["cache"]))\n'
                                        'rule all:\n    output: "x"\n    shell: "touch {output}"\n')
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--profile", str(REPO / "profiles" / profile),
                          "--default-storage-prefix", str(tmp_path)], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    line = next(x for x in (out.stdout + out.stderr).splitlines() if x.startswith("CACHE "))
    assert json.loads(line[6:]) == {"path": "results/cache/llm.sqlite", "mode": "use", "backend": "shards"}


EMBEDDER = """
import asyncio, json, sys, time
from pathlib import Path
from memtrials.llm import open_client
cfg, me, folder = json.load(open(sys.argv[1])), sys.argv[2], Path(sys.argv[3])
async def main():
    async with open_client(cfg, "embed/" + me) as client:
        (folder / f"ready.{me}").touch()
        while len(list(folder.glob("ready.*"))) < 2:  # a barrier: both send at once
            await asyncio.sleep(0.002)
        r = await client.embed("emb", [f"text {i}" for i in range(12)])
        print(json.dumps({"ids": r.call_ids, "vectors": r.vectors.tolist(), "fresh": client.fresh_calls}))
asyncio.run(main())
"""


def test_processes_embedding_the_same_texts_at_once_store_one_entry_each(loopback, tmp_path):
    from memtrials.testing import Faults
    from tests.test_embeddings import _config as embed_config

    srv = loopback(faults=Faults(latency_s=0.5))
    cfg = embed_config(tmp_path, srv, batch_size=4)
    cfg["cache"]["backend"] = "shards"
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    procs = [subprocess.Popen([sys.executable, "-c", EMBEDDER, str(tmp_path / "cfg.json"), name, str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for name in "ab"]
    outs = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert outs[0]["ids"] == outs[1]["ids"] and outs[0]["vectors"] == outs[1]["vectors"]
    cache = ShardCache(cfg["cache"]["path"])
    assert len(cache.records()) == 12 and cache.duplicates() == 0  # one stored entry per text
    assert sum(t[1] for t in cache.totals()) == outs[0]["fresh"] + outs[1]["fresh"]  # every paid text counted
    cache.close()
    srv.reset_stats()
    assert json.loads(subprocess.run([sys.executable, "-c", EMBEDDER.replace("< 2", "< 1"), str(tmp_path / "cfg.json"),
                                      "c", str(tmp_path)], capture_output=True, text=True, timeout=120,
                                     check=True).stdout.splitlines()[-1])["fresh"] == 0
    assert srv.stats.requests == 0  # a rerun replays every text


def test_a_claim_from_another_host_is_taken_over_once_its_heartbeat_stops(tmp_path):
    path = tmp_path / "llm.sqlite"
    waiter = ShardCache(path, lost_after_s=1.5)
    with claim_held(path, "another-node", heartbeat_s=0.1):
        assert json.loads(waiter.claims.path("k").read_text())["host"] == "another-node"
        time.sleep(2.0)
        assert waiter.claim("k", "here", stale_s=3600) is False  # its pid means nothing here: the heartbeat does
    killed = time.monotonic()
    while (got := waiter.claim("k", "here", stale_s=3600)) is False and time.monotonic() < killed + 30:
        time.sleep(0.05)
    assert got is True
    assert time.monotonic() - killed >= 1.0  # not at once: only when the heartbeat was lost_after_s old
    waiter.close()
