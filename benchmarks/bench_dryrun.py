"""``snakemake -n`` on every paper preset: wall time and job count (target: under 30 s each).

Each preset runs in a fresh process from the repository root, as a user would type it
(``snakemake -n --configfile config/presets/<name>.yaml``), with ``--quiet rules`` so the
printed summary is the job table.  A preset that stops at parse time by design (the
history preset on the generated data: more tasks per cell than the generated ALFWorld
eval split holds) is run with the overlay that its docs name, given with ``--overlay``
(``name=path``), or reported as stopped with its first error line.

    python benchmarks/bench_dryrun.py [--presets luck-paper playbook-paper ...] [--runs 1]

The last line is the slowest preset's median time against the 30 s target.
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PRESETS = sorted(p.stem for p in (REPO / "config" / "presets").glob("*.yaml") if not p.name.endswith(".models.yaml"))


def dry_run(preset: str, extra: list[str]) -> tuple[float, int | None, str]:
    cmd = [sys.executable, "-m", "snakemake", "-n", "--quiet", "rules", "--configfile",
           str(REPO / "config" / "presets" / f"{preset}.yaml"), *extra]
    t0 = time.perf_counter()
    out = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    text = out.stdout + out.stderr
    m = re.search(r"^total\s+(\d+)\s*$", text, re.M)
    if out.returncode != 0:
        first = next((line for line in text.splitlines() if "Error" in line or "error" in line), text[-200:])
        return wall, None, first.strip()
    return wall, int(m.group(1)) if m else 0, ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--presets", nargs="+", default=PRESETS)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--overlay", action="append", default=[], help="name=path: an extra --configfile for a preset")
    args = ap.parse_args(argv)
    overlays = dict(o.split("=", 1) for o in args.overlay)
    worst = 0.0
    for preset in args.presets:
        extra = ["--configfile", overlays[preset]] if preset in overlays else []
        times, jobs, error = [], None, ""
        for _ in range(args.runs):
            wall, jobs, error = dry_run(preset, extra)
            times.append(wall)
        med = statistics.median(times)
        if error:
            print(f"{preset:24s} stopped at parse time after {med:5.1f} s: {error[:160]}")
            continue
        worst = max(worst, med)
        print(f"{preset:24s} {jobs:6d} jobs  {med:5.1f} s (median of {len(times)})")
    print(f"slowest preset dry run: {worst:.1f} s (target < 30 s): {'met' if worst < 30 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
