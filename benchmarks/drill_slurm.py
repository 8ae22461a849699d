"""Drill: the Slurm profile (``--workflow-profile profiles/slurm``) submitting real jobs.

The profile's test (``tests/test_profiles.py``) dry-runs it; this drill runs it on a Slurm
cluster: the default Lessons-from-Luck study (worlds, freeze, writers, readers, analysis,
report) against the loopback endpoint, every job through ``sbatch`` with the profile's
resources and its ``shards`` response cache.  Then:

* the same targets without it (local jobs under ``profiles/default``, the ``sqlite`` cache)
  in another workflow copy, on the same endpoint (same port, so the same cache keys): every table
  identical byte for byte, every Parquet output except the calls' timing columns, every JSON
  manifest except its times of writing and the digests of the (timed) call records;
* a forced rerun of every job through Slurm: no request reaches the endpoint (the shards
  cache replays every call across jobs) and every output identical again.

    python benchmarks/drill_slurm.py [--start-cluster] [--status-command squeue|sacct] [--keep]

A cluster must answer ``sinfo``.  ``--start-cluster`` (root, Debian's ``slurmctld``,
``slurmd``, ``slurm-client`` and ``munge`` installed, no ``/etc/slurm/slurm.conf`` yet)
writes a one-node cluster's ``slurm.conf`` and a munge key and starts ``munged``,
``slurmctld`` and ``slurmd``; it leaves them running.  Without Slurm accounting (such a
one-node cluster) ``sacct`` answers "accounting storage is disabled", so job states come
from ``squeue`` (``--slurm-status-command squeue``, the default here; ``MinJobAge`` is
600 s in the written ``slurm.conf``, as the executor plugin asks).

The last line is the figure: ``slurm: ... ok=yes|no``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

from drill_common import PY, Checks, env, loopback_overlay, workflow_copy

from memtrials.testing import TEST_KEY_ENV, LoopbackServer

TARGETS = ["results/luck/analysis/registered.json", "results/luck/tables/table1_panel.md"]
TIMING = {"latency_s", "attempts", "errors", "started_at", "finished_at"}
CONF = Path("/etc/slurm/slurm.conf")
MARK = "# written by benchmarks/drill_slurm.py"


def start_cluster() -> None:
    """A one-node cluster on this machine (module docstring)."""
    if os.geteuid() != 0:
        raise SystemExit("drill_slurm: --start-cluster needs root")
    for tool in ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "sinfo"):
        if shutil.which(tool) is None and not Path(f"/usr/sbin/{tool}").exists():
            raise SystemExit(f"drill_slurm: {tool} missing. Fix: apt-get install --no-install-recommends "
                             f"slurmctld slurmd slurm-client munge")
    if CONF.exists() and MARK not in CONF.read_text():
        raise SystemExit(f"drill_slurm: {CONF} exists and was not written by this drill; not touching it "
                         f"(run without --start-cluster to use that cluster)")
    host = socket.gethostname().split(".")[0]
    mem = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 * 0.85)
    for d in ("/etc/slurm", "/var/spool/slurmd", "/var/spool/slurmctld", "/var/log/slurm", "/run/munge"):
        Path(d).mkdir(parents=True, exist_ok=True)
    CONF.write_text(f"""{MARK}
ClusterName=memtrials
SlurmctldHost={host}
AuthType=auth/munge
CredType=cred/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmdSpoolDir=/var/spool/slurmd
StateSaveLocation=/var/spool/slurmctld
SlurmUser=root
SlurmdUser=root
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
MinJobAge=600
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
NodeName={host} CPUs={os.cpu_count()} RealMemory={mem} State=UNKNOWN
PartitionName=main Nodes=ALL Default=YES MaxTime=INFINITE State=UP
""")
    key = Path("/etc/munge/munge.key")
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_bytes(os.urandom(1024))
    shutil.chown(key, "munge", "munge")
    key.chmod(0o400)
    for d in ("/etc/munge", "/run/munge", "/var/lib/munge", "/var/log/munge"):
        Path(d).mkdir(parents=True, exist_ok=True)
        shutil.chown(d, "munge", "munge")
    if subprocess.run(["pgrep", "-x", "munged"], capture_output=True).returncode != 0:
        subprocess.run(["su", "-s", "/bin/sh", "munge", "-c", "/usr/sbin/munged"], check=True)
    for daemon in ("slurmctld", "slurmd"):
        if subprocess.run(["pgrep", "-x", daemon], capture_output=True).returncode != 0:
            subprocess.run([f"/usr/sbin/{daemon}"], check=True)
        time.sleep(1)
    for _ in range(30):
        if cluster_up():
            return
        time.sleep(1)
    raise SystemExit("drill_slurm: the cluster did not come up (see /var/log/slurm/)")


def cluster_up() -> bool:
    try:
        got = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20)
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return False
    return got.returncode == 0 and any(s.strip() in ("idle", "mixed", "allocated") for s in got.stdout.split())


def run(wf: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    out = subprocess.run([PY, "-m", "snakemake", *args, "--configfile", "overlay.yaml", "--", *TARGETS],
                         cwd=wf, capture_output=True, text=True, timeout=3600,
                         env=env({TEST_KEY_ENV: "drill-slurm"}))
    return out, time.monotonic() - t0


def outputs(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted((root / "results" / "luck").rglob("*")) if p.is_file()}


def same(a: Path, b: Path) -> bool:
    if a.suffix == ".parquet":
        import pyarrow.parquet as pq

        ta, tb = pq.read_table(a), pq.read_table(b)
        drop = [c for c in ta.column_names if c in TIMING]
        return ta.drop(drop).equals(tb.drop([c for c in tb.column_names if c in TIMING]))
    if a.name.endswith(".spec.json"):  # a file's provenance: its own digest and time of writing
        return True
    if a.suffix == ".json":  # manifests: when each was written, and digests of the timed call records
        return _untimed(json.loads(a.read_text())) == _untimed(json.loads(b.read_text()))
    return a.read_bytes() == b.read_bytes()


def _untimed(obj):
    if isinstance(obj, dict):
        return {k: ("<digest of timed records>" if k.endswith(".calls.parquet") else _untimed(v))
                for k, v in obj.items() if k != "at"}
    if isinstance(obj, list):
        return [_untimed(v) for v in obj]
    return obj


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--start-cluster", action="store_true", help="start a one-node cluster here (root)")
    ap.add_argument("--status-command", default="squeue", choices=["squeue", "sacct"])
    ap.add_argument("--keep", action="store_true", help="keep the workflow copies")
    args = ap.parse_args()
    if args.start_cluster:
        start_cluster()
    if not cluster_up():
        print("drill_slurm: no Slurm cluster answers sinfo. Fix: run on a login node, or pass --start-cluster "
              "(root) after apt-get install --no-install-recommends slurmctld slurmd slurm-client munge",
              file=sys.stderr)
        print("slurm: ran=no ok=no")
        return 2
    t_all = time.monotonic()
    wf_slurm = workflow_copy(prefix="memtrials-drill-slurm-")
    wf_local = workflow_copy(prefix="memtrials-drill-slurm-local-")
    check = Checks()
    fig = check.fig
    profile = ["--workflow-profile", "profiles/slurm", "--slurm-status-command", args.status_command]
    with LoopbackServer() as srv:
        for wf in (wf_slurm, wf_local):
            loopback_overlay(srv, wf)
        out, secs = run(wf_slurm, *profile)
        jobs = len(re.findall(r"submitted with SLURM jobid", out.stdout + out.stderr))
        paid = srv.stats.completions
        print(f"1. through Slurm: rc {out.returncode}, {jobs} sbatch jobs, {paid} completions, {secs:.0f} s")
        if out.returncode != 0:
            print((out.stdout + out.stderr)[-5000:])
        check(out.returncode == 0 and jobs > 0, "every job ran as a Slurm job and the run ended rc 0")
        shards = list((wf_slurm / "results" / "cache" / "shards").glob("*.jsonl"))
        check(bool(shards) and not (wf_slurm / "results" / "cache" / "llm.sqlite").exists(),
              f"the profile's shards cache was used ({len(shards)} shard files, no SQLite file)")
        fig.update(jobs=str(jobs), rc=str(out.returncode), requests=str(paid))

        srv.reset_stats()
        out_l, secs_l = run(wf_local, "--cores", "2")
        print(f"2. locally: rc {out_l.returncode}, {srv.stats.completions} completions, {secs_l:.0f} s")
        check(out_l.returncode == 0, "the local run ended rc 0")
        a, b = outputs(wf_slurm), outputs(wf_local)
        common = sorted(set(a) & set(b))
        differ = [k for k in common if not same(a[k], b[k])]
        for k in differ[:10]:
            print(f"     differs: {k}")
        check(set(a) == set(b) and not differ, f"Slurm and local outputs identical ({len(common) - len(differ)}/{len(common)})")
        fig["identical"] = f"{len(common) - len(differ)}/{len(common)}"

        before = {k: p.read_bytes() for k, p in a.items() if not k.endswith(".spec.json")}
        srv.reset_stats()
        out_r, secs_r = run(wf_slurm, *profile, "--forceall")
        jobs_r = len(re.findall(r"submitted with SLURM jobid", out_r.stdout + out_r.stderr))
        print(f"3. forced rerun through Slurm: rc {out_r.returncode}, {jobs_r} jobs, {srv.stats.requests} requests, "
              f"{secs_r:.0f} s")
        check(out_r.returncode == 0 and srv.stats.requests == 0, "a forced rerun sends no request")
        again = outputs(wf_slurm)
        redo = [k for k, data in before.items() if k not in again or again[k].read_bytes() != data]
        for k in redo[:10]:
            print(f"     differs: {k}")
        check(not redo, f"the rerun's outputs are the first run's, byte for byte ({len(before) - len(redo)}/{len(before)})")
        fig["rerun_requests"] = str(srv.stats.requests)
    if not args.keep:
        for wf in (wf_slurm, wf_local):
            shutil.rmtree(wf.parent, ignore_errors=True)
    else:
        print(f"kept {wf_slurm} and {wf_local}")
    fig["minutes"] = f"{(time.monotonic() - t_all) / 60:.1f}"
    return check.figure("slurm:")


if __name__ == "__main__":
    sys.exit(main())
