"""``snakemake -n`` on every paper preset: wall time and job count (target: under 30 s each).

Each preset runs in a fresh process from the repository root, as a user would type it
(``snakemake -n --configfile config/presets/<name>.yaml``), with ``--quiet rules`` so the
printed summary is the job table.  A preset that stops at parse time by design (the
history preset on the generated data: more tasks per cell than the generated ALFWorld
eval split holds) is run with the overlay that its docs name, given with ``--overlay``
(``name=path``), or reported as stopped with its first error line.

    python benchmarks/bench_dryrun.py [--presets luck-paper playbook-paper ...] [--runs 1]

Beside the wall time each line gives the dry run's CPU time (user + system of the child)
and the load average when it started: on a shared machine the wall time under load says
little, and the CPU time is what an idle machine's wall time comes close to (the dry run is
one process).  The last line is the slowest preset's median time against the 30 s target,
wall and CPU.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRESETS = sorted(p.stem for p in (REPO / "config" / "presets").glob("*.yaml") if not p.name.endswith(".models.yaml"))


def dry_run(preset: str, extra: list[str]) -> tuple[float, float, int | None, str]:
    """Wall seconds, CPU seconds, job count (``None`` if it stopped) and the first error line."""
    cmd = [sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--configfile",
           str(REPO / "config" / "presets" / f"{preset}.yaml"), *extra]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    text = out.stdout + out.stderr
    m = re.search(r"^total\s+(\d+)\s*$", text, re.M)
    if out.returncode != 0:
        first = next((line for line in text.splitlines() if "Error" in line or "error" in line), text[-200:])
        return wall, cpu, None, first.strip()
    return wall, cpu, int(m.group(1)) if m else 0, ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=PRESETS)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--overlay", action="append", default=[], help="name=path: an extra --configfile for a preset")
    args = ap.parse_args(argv)
    overlays = dict(o.split("=", 1) for o in args.overlay)
    worst, worst_cpu = 0.0, 0.0
    for preset in args.presets:
        extra = ["--configfile", overlays[preset]] if preset in overlays else []
        times, cpus, jobs, error = [], [], None, ""
        for _ in range(args.runs):
            load = os.getloadavg()[0]
            wall, cpu, jobs, error = dry_run(preset, extra)
            times.append(wall)
            cpus.append(cpu)
        med, med_cpu = statistics.median(times), statistics.median(cpus)
        if error:
            print(f"{preset:24s} stopped at parse time after {med:5.1f} s: {error[:160]}")
            continue
        worst, worst_cpu = max(worst, med), max(worst_cpu, med_cpu)
        print(f"{preset:24s} {jobs:6d} jobs  {med:5.1f} s wall  {med_cpu:5.1f} s CPU"
              f"  (median of {len(times)}; load {load:.1f} at the start)")
    print(f"slowest preset dry run: {worst:.1f} s wall, {worst_cpu:.1f} s CPU (target < 30 s): "
          f"{'met' if worst < 30 else 'NOT met'} on wall time, {'met' if worst_cpu < 30 else 'NOT met'} on CPU time")
    return 0


if __name__ == "__main__":
    sys.exit(main())
