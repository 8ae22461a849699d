"""Job-minutes of a finished run, per study and per rule, read from its Snakemake log.

A job's minutes run from the timestamp of the block that starts it (``rule``/``localrule`` ...
``jobid: N``) to the timestamp before ``Finished jobid: N`` (Snakemake 9; ``Finished job N.``
in older logs).  Summed over jobs they say where a run's time went, whatever ran at once; the
studies are the rule names' first word (``env_*`` = the environments' data).  Timestamps have
one-second resolution, so a run of many short jobs is only roughly counted.

    python benchmarks/job_minutes.py .snakemake/log/<run>.snakemake.log [--rules]
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from datetime import datetime
from pathlib import Path

_STAMP = re.compile(r"^\[(\w{3} \w{3} +\d+ \d\d:\d\d:\d\d \d{4})\]$")
_RULE = re.compile(r"^(?:local)?rule (\w+):$")
_JOBID = re.compile(r"^\s+jobid: (\d+)$")
_DONE = re.compile(r"^Finished job(?:id:)? (\d+)\b")
STUDY = {"env": "environment data"}


def job_seconds(lines: list[str]) -> dict[str, float]:
    """Seconds per rule, summed over the log's finished jobs."""
    stamp: datetime | None = None
    rule: str | None = None
    started: dict[str, tuple[str, datetime]] = {}
    per_rule: Counter[str] = Counter()
    for line in lines:
        if m := _STAMP.match(line):
            stamp = datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y")
        elif m := _RULE.match(line):
            rule = m.group(1)
        elif (m := _JOBID.match(line)) and rule is not None and stamp is not None:
            started[m.group(1)] = (rule, stamp)
            rule = None
        elif (m := _DONE.match(line)) and m.group(1) in started and stamp is not None:
            name, begun = started.pop(m.group(1))
            per_rule[name] += (stamp - begun).total_seconds()
    return dict(per_rule)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", type=Path, help="a run's .snakemake/log/*.snakemake.log")
    ap.add_argument("--rules", action="store_true", help="also list every rule")
    args = ap.parse_args()
    per_rule = job_seconds(args.log.read_text().splitlines())
    if not per_rule:
        sys.exit(f"{args.log}: no finished job found (not a Snakemake run log?)")
    per_study: Counter[str] = Counter()
    for name, seconds in per_rule.items():
        head = name.split("_")[0]
        per_study[STUDY.get(head, head)] += seconds
    print(f"{args.log.name}: {sum(per_rule.values()) / 60:.1f} job-minutes")
    for study, seconds in per_study.most_common():
        print(f"  {study:18} {seconds / 60:6.1f}")
    if args.rules:
        for name, seconds in sorted(per_rule.items(), key=lambda kv: -kv[1]):
            print(f"    {name:30} {seconds / 60:6.1f}")


if __name__ == "__main__":
    main()
