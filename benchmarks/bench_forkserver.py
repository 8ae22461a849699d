"""Starting N AppWorld / ALFWorld environments: spawned children against children forked
from a warm fork server (``envs.fork_server``, :mod:`memtrials.envs.process.forkserver`).

Each environment is built, reset on one task, stepped once and closed, one after another
(as a job's pool builds them).  For each engine and mode it prints the CPU seconds
(user + system) and the wall seconds, and the ratios spawned / forked.  CPU counts this
process, its waited children (the spawned environments) and, in fork mode, the forked
children (each reports its CPU when it closes) plus all the server's own CPU (its start,
warm-up, forks and polling, from ``/proc``), so the forked figure is what the machine spent, not what the job saw.  Every
mode runs in its own Python process (the first one's imports would favour the second).

    python benchmarks/bench_forkserver.py [--n 4] [--appworld-root resources/appworld]
        [--alfworld-root resources/alfworld/games] [--engines appworld alfworld]

The load average is printed beside the figures (the machine may be shared).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

ONE = r"""
import json, os, resource, sys, time
from pathlib import Path
from memtrials.envs.process import forkserver
from memtrials.envs.process.child import ProcessEnv
from memtrials.machine import read_info
from memtrials.llm.local.shared import stop_all
name, root, task, action, n, folder = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6]
def cpu():
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime + forkserver.FORKED_CPU_S[0]
forkserver.use(folder if folder != "-" else None, idle_s=30)
c0, w0, first, texts = cpu(), time.monotonic(), None, []
for i in range(n):
    env = ProcessEnv(name, {"root": root})
    texts.append(env.reset(task).text + env.step(action).text)
    env.close()
    first = first if first is not None else time.monotonic() - w0
wall, used = time.monotonic() - w0, cpu() - c0
warm = 0.0
if folder != "-":
    for info in [read_info(p) for p in Path(folder).glob("envfork-*.json")]:
        stat = Path(f"/proc/{info['pid']}/stat").read_text().rsplit(")", 1)[1].split()
        warm += (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")  # the server's whole CPU so far
    stop_all(folder)
print(json.dumps({"cpu_s": used + warm, "warm_cpu_s": warm, "wall_s": wall, "first_wall_s": first,
                  "same": len(set(texts)) == 1, "digest": texts[0]}))
"""


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run_mode(name: str, root: str, task: str, action: str, n: int, fork: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-fork-") as tmp:
        folder = str(Path(tmp) / "servers") if fork else "-"
        env = dict(os.environ, PYTHONPATH=str(REPO / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
        proc = subprocess.run([sys.executable, "-c", ONE, name, root, task, action, str(n), folder],
                              capture_output=True, text=True, cwd=REPO, env=env, timeout=1800)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr[-3000:])
        return json.loads(proc.stdout.strip().splitlines()[-1])


def first_task(name: str, root: Path) -> tuple[str, str]:
    if name == "appworld":
        return sorted(p.name for p in (root / "data" / "tasks").iterdir())[0], "print(apis.supervisor.show_account_passwords())"
    from memtrials.envs.alfworld.env import task_rows

    return sorted(r["task_id"] for r in task_rows(root))[0], "look"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--engines", nargs="+", default=["appworld", "alfworld"])
    ap.add_argument("--appworld-root", default="resources/appworld")
    ap.add_argument("--alfworld-root", default="resources/alfworld/games")
    a = ap.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load {load()}")
    for name in a.engines:
        root = Path(a.appworld_root if name == "appworld" else a.alfworld_root).resolve()
        task, action = first_task(name, root)
        spawned = run_mode(name, str(root), task, action, a.n, fork=False)
        forked = run_mode(name, str(root), task, action, a.n, fork=True)
        assert spawned["same"] and forked["same"] and spawned["digest"] == forked["digest"], (spawned, forked)
        for label, r in (("spawned", spawned), ("forked", forked)):
            print(f"{name} x{a.n} {label:8s} {r['cpu_s']:7.2f} CPU-s (of which the server {r['warm_cpu_s']:.2f}), "
                  f"{r['wall_s']:6.2f} s wall, first env {r['first_wall_s']:.2f} s")
        print(f"{name} x{a.n} ratio spawned/forked: CPU {spawned['cpu_s'] / forked['cpu_s']:.1f}x, "
              f"wall {spawned['wall_s'] / forked['wall_s']:.1f}x; per further env "
              f"{(spawned['cpu_s']) / a.n:.2f} vs {(forked['cpu_s'] - forked['warm_cpu_s']) / a.n:.2f} CPU-s; "
              f"load {load()}")


if __name__ == "__main__":
    main()
