"""A fully cached, forced rerun of the default pipeline's study rules: what a job costs when
every model call replays (issue 14's target: the whole rerun in under 2 minutes).

In a scratch copy (a ``git clone`` of this checkout with its ``.venv`` linked, ``resources/``
and the results copied in, so nothing here is touched) it reruns every job of the study
rules with ``--forcerun`` and ``--allowed-rules`` (the environment-data and smoke rules are
not rerun: their outputs are taken as they are), then prints

- the rerun's wall time, its job count, the CPU seconds of Snakemake and of every process
  it waited for (user + system), and the load average (min-max, sampled every 5 s: the
  machine may be shared, and the CPU seconds are what an idle machine's time comes close to);
- the per-rule fixed cost, top 5 by CPU: mean wall and CPU per job, from each job's
  ``job cost:`` log line (:func:`memtrials.pipeline.rule_entry.job_cost`), split into the job's own
  Python process and its waited children (the environments' processes);
- whether the rerun was fully cached (the response cache's size before and after: a rerun
  over results with missing jobs makes fresh calls and is not the figure the target means);
- the whole machine's CPU during the rerun (``/proc/stat``): what no per-process sum misses (the
  shared ScienceWorld JVMs, the fork servers' children), and what else ran beside it.

    python benchmarks/bench_cached_rerun.py --results /path/to/results [--resources /path/to/resources]
    python benchmarks/bench_cached_rerun.py            # first a full run in the scratch copy (long)

``--targets`` and ``--rules`` narrow the rerun (e.g. only outputs that exist in a stopped
run); ``--rev`` runs another commit of this checkout; ``--keep`` keeps the scratch copy;
``--job-server both`` reruns with ``servers.job_server`` off and then on over the same copy,
adds the job server's own and its children's CPU (from its log: they are not Snakemake's
children) and says whether the outputs are byte-identical.  The last line is the rerun's wall and CPU time
against the 2-minute target.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
from memtrials.pipeline.rule_entry import COST_LINE  # noqa: E402

NOT_STUDY = ("all", "smoke")
TARGET_S = 120.0


def snakemake(cwd: Path, args: list[str], log: Path) -> tuple[int, float, float]:
    """Run Snakemake in ``cwd`` with its own ``src`` first on the path: (rc, wall s, CPU s)."""
    env = dict(os.environ, PYTHONPATH=str(cwd / "src"))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log, "w") as out:
        rc = subprocess.run([str(cwd / ".venv" / "bin" / "snakemake"), *args], cwd=cwd, env=env,
                            stdout=out, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return rc, wall, cpu


class LoadSampler(threading.Thread):
    """The 1-minute load average every ``every`` seconds while a run lasts."""

    def __init__(self, every: float = 5.0) -> None:
        super().__init__(daemon=True)
        self.every, self.samples, self.done = every, [], threading.Event()

    def run(self) -> None:
        while True:
            self.samples.append(os.getloadavg()[0])
            if self.done.wait(self.every):
                return

    def span(self) -> str:
        return f"{min(self.samples):.1f}-{max(self.samples):.1f}" if self.samples else "?"


def study_rules(cwd: Path) -> list[str]:
    out = subprocess.run([str(cwd / ".venv" / "bin" / "snakemake"), "--list-rules"], cwd=cwd, check=True,
                         capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(cwd / "src"))).stdout
    names = [ln.split()[0] for ln in out.splitlines() if ln.strip() and not ln.startswith(" ")]
    return [n for n in names if n not in NOT_STUDY and not n.startswith("env_")]


def dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def cache_bytes(cache: Path) -> int:
    """The response cache's size (its folder less the servers' logs and registrations)."""
    if not cache.exists():
        return 0
    return sum(p.stat().st_size for p in cache.rglob("*") if p.is_file() and "servers" not in p.relative_to(cache).parts)


def job_costs(run_log: Path, cwd: Path) -> dict[str, list[dict[str, Any]]]:
    """Per rule, each finished job's ``job cost:`` figures (from the logs the run log names)."""
    text = run_log.read_text(errors="replace")
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", text):
        m = re.match(r"(?:local)?rule (\w+):", block)
        logm = re.search(r"^\s+log: (\S+)", block, flags=re.M)
        if not m or not logm:
            continue
        log = cwd / logm.group(1).rstrip(",")
        if not log.exists():
            continue
        found = None
        for line in log.read_text(errors="replace").splitlines():
            found = COST_LINE.search(line) or found
        if found is not None:
            out[m.group(1)].append({"wall": float(found["wall"]) if found["wall"] != "-" else float("nan"),
                                    "cpu": float(found["cpu"]), "children": float(found["children"]),
                                    "log": logm.group(1).rstrip(",")})
    return out


def server_costs(servers: Path, since: dict[str, int]) -> dict[str, float]:
    """CPU seconds the job servers and environment fork servers logged after the offsets in
    ``since``: the job server's own (``in the server``) and its children's (they are not
    Snakemake's children, so Snakemake's waited CPU misses them), the fork servers' warm-up."""
    out = {"jobserver": 0.0, "jobserver_children": 0.0, "jobserver_warm": 0.0, "jobs_forked": 0.0, "envfork_warm": 0.0}
    for log in sorted(servers.glob("*.log")) if servers.exists() else []:
        text = log.read_bytes()[since.get(log.name, 0):].decode(errors="replace")
        if log.name.startswith("jobserver-"):
            for m in re.finditer(r"after (\d+) jobs, ([0-9.]+) CPU-s in the server \(warm-up ([0-9.]+)\), "
                                 r"([0-9.]+) CPU-s in the jobs' children", text):
                out["jobs_forked"] += int(m[1])
                out["jobserver"] += float(m[2])
                out["jobserver_warm"] += float(m[3])
                out["jobserver_children"] += float(m[4])
        elif log.name.startswith("envfork-"):
            out["envfork_warm"] += sum(float(x) for x in re.findall(r"warm-up ([0-9.]+) CPU-s", text))
    return out


def record_sizes(results: Path) -> dict[str, int]:
    folder = results / "records"
    return {str(p.relative_to(results)): p.stat().st_size for p in folder.glob("*")} if folder.exists() else {}


def digest_outputs(results: Path, records_before: dict[str, int]) -> dict[str, str]:
    """SHA-256 of every file under ``results`` but the response cache and the servers' files;
    of a call record file (``records/``, append-only: every rerun adds its calls), only what
    this rerun appended."""
    out = {}
    for p in sorted(results.rglob("*")):
        rel = p.relative_to(results)
        if p.is_file() and rel.parts[0] != "cache":
            data = p.read_bytes()
            if rel.parts[0] == "records":
                data = data[records_before.get(str(rel), 0):]
            out[str(rel)] = hashlib.sha256(data).hexdigest()
    return out


def rerun(scratch: Path, common: list[str], rules: list[str], cores: str, job_server: bool | None) -> dict[str, str]:
    """One forced rerun of ``rules`` (``job_server``: the key's value, ``None``: the config's);
    prints its figures; the output digests after it."""
    label = {None: "as configured", True: "on", False: "off"}[job_server]
    extra: list[str] = []
    if job_server is not None:
        overlay = scratch / f"job-server-{label}.yaml"
        overlay.write_text(f"servers:\n  job_server: {'true' if job_server else 'false'}\n")
        extra = ["--configfile", str(overlay)]
    cache = scratch / "results" / "cache"
    servers = cache / "servers"
    since = {p.name: p.stat().st_size for p in servers.glob("*.log")} if servers.exists() else {}
    cache_before = cache_bytes(cache)
    records_before = record_sizes(scratch / "results")
    sampler = LoadSampler()
    sampler.start()
    run_log = scratch / f"rerun-job-server-{label}.log"
    machine_before = machine_cpu()
    rc, wall, cpu = snakemake(scratch, [*extra, *common, "--forcerun", *rules, "--allowed-rules", *rules,
                                        "--rerun-triggers", "mtime"], run_log)
    machine = machine_cpu() - machine_before
    sampler.done.set()
    sampler.join()
    cache_after = cache_bytes(cache)
    costs = job_costs(run_log, scratch)
    (scratch / f"costs-job-server-{label}.json").write_text(json.dumps(costs, indent=1, sort_keys=True))
    srv = server_costs(servers, since)
    jobs = len(re.findall(r"^Finished job", run_log.read_text(errors="replace"), flags=re.M))
    total = cpu + srv["jobserver"] + srv["jobserver_children"]
    print(f"== job server {label}")
    print(f"cached forced rerun: rc {rc}, {jobs} jobs, {wall:.0f} s wall, {cpu:.0f} CPU-s (Snakemake and "
          f"every waited process), load {sampler.span()} on {os.cpu_count()} cores")
    if srv["jobs_forked"]:
        print(f"job server: {srv['jobs_forked']:.0f} jobs forked, {srv['jobserver']:.1f} CPU-s in the server "
              f"({srv['jobserver_warm']:.1f} of them its warm-up), {srv['jobserver_children']:.1f} CPU-s in its "
              f"children (not Snakemake's): {total:.0f} CPU-s in all")
    if srv["envfork_warm"]:
        print(f"environment fork servers: {srv['envfork_warm']:.1f} CPU-s of warm-up (not counted above)")
    print(f"the whole machine during the rerun (/proc/stat, every process: Snakemake, the jobs, the job and fork "
          f"servers and their children, the shared ScienceWorld JVMs, anything else running): {machine:.0f} CPU-s")
    grew = cache_after - cache_before
    print("fully cached: yes (the response cache did not grow)" if grew <= 0 else
          f"fully cached: NO (the response cache grew by {grew} bytes: fresh calls were made)")
    rows = []
    for rule, items in costs.items():
        tot = [i["cpu"] + i["children"] for i in items]
        rows.append((sum(tot), rule, len(items), statistics.fmean(i["wall"] for i in items),
                     statistics.fmean(i["cpu"] for i in items), statistics.fmean(i["children"] for i in items)))
    rows.sort(reverse=True)
    in_jobs = sum(r[0] for r in rows)
    n_jobs = sum(r[2] for r in rows)
    print(f"per-rule fixed cost, {'all' if len(rows) <= 10 else 'top 5 of'} {len(rows)} by CPU (the jobs' own CPU: {in_jobs:.1f} CPU-s over {n_jobs} "
          f"cost lines, {in_jobs / max(1, n_jobs):.2f} a job; the rest is Snakemake and processes not waited for):")
    print(f"  {'rule':28s} {'jobs':>4s} {'wall/job':>9s} {'CPU/job':>8s} {'python':>7s} {'children':>8s} {'total':>7s}")
    for tot, rule, n, w, c, ch in (rows if len(rows) <= 10 else rows[:5]):
        print(f"  {rule:28s} {n:4d} {w:8.1f}s {c + ch:7.2f}s {c:6.2f}s {ch:7.2f}s {tot:6.1f}s")
    if rc:
        print(f"the rerun failed (rc {rc}): {run_log}")
    print(f"cached forced rerun: {wall:.0f} s wall, {total:.0f} CPU-s ({total / max(1, int(cores)):.0f} s on "
          f"{cores} idle cores at best) for {jobs} jobs; target {TARGET_S:.0f} s", flush=True)
    return digest_outputs(scratch / "results", records_before)


def machine_cpu() -> float:
    """CPU seconds (user, nice, system, irq, softirq) the whole machine has spent since boot."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def prepare(scratch: Path, results: Path | None, resources: Path, rev: str) -> None:
    subprocess.run(["git", "clone", "-q", str(REPO), str(scratch)], check=True)
    subprocess.run(["git", "-C", str(scratch), "checkout", "-q", rev], check=True)
    (scratch / ".venv").symlink_to(REPO / ".venv")
    shutil.copytree(resources, scratch / "resources", symlinks=True)
    if results is not None:
        shutil.copytree(results, scratch / "results", symlinks=True,
                        ignore=shutil.ignore_patterns("servers"))  # no live server of the source run


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", type=Path, help="a finished default run's results/ (copied; default: run it first)")
    ap.add_argument("--resources", type=Path, default=REPO / "resources", help="environment data (copied)")
    ap.add_argument("--targets", nargs="*", default=["all"])
    ap.add_argument("--rules", nargs="*", help="rules to rerun (default: every study rule)")
    ap.add_argument("--cores", default="2")
    ap.add_argument("--rev", default="HEAD", help="the commit to run (before/after comparisons; a commit "
                    "before the job cost line gives no per-rule table)")
    ap.add_argument("--workdir", type=Path, help="scratch folder (default: a new temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy")
    ap.add_argument("--job-server", choices=("config", "on", "off", "both"), default="config",
                    help="servers.job_server for the rerun; both: off, then on over the same copy, and "
                    "whether the outputs are byte-identical")
    args = ap.parse_args(argv)

    scratch = args.workdir or Path(tempfile.mkdtemp(prefix="memtrials-cached-rerun-"))
    if scratch.exists() and any(scratch.iterdir()):
        sys.exit(f"{scratch}: not empty; give an empty or new --workdir")
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        prepare(scratch, args.results, args.resources, args.rev)
        common = ["--cores", str(args.cores), *args.targets]
        if args.results is None:
            rc, wall, cpu = snakemake(scratch, common, scratch / "first-run.log")
            print(f"first run: rc {rc}, {wall:.0f} s wall, {cpu:.0f} CPU-s")
            if rc:
                sys.exit(f"the first run failed: {scratch / 'first-run.log'}")
        rules = args.rules or study_rules(scratch)
        modes = {"config": [None], "on": [True], "off": [False], "both": [False, True]}[args.job_server]
        digests = {}
        for mode in modes:
            digests[mode] = rerun(scratch, common, rules, args.cores, mode)
        if len(modes) == 2:
            off, on = digests[False], digests[True]
            differ = sorted(p for p in set(off) | set(on) if off.get(p) != on.get(p))
            print(f"outputs byte-identical with the job server off and on: {'yes' if not differ else 'NO'} "
                  f"({len(off)} files under results/, the response cache and server files left out; of the "
                  f"append-only call records, the calls each rerun appended)")
            for path in differ[:20]:
                print(f"  differs: {path}")
    finally:
        if not args.keep:
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"scratch copy kept: {scratch}")


if __name__ == "__main__":
    main()
