"""Paper scale, measured: a paper preset's cell shape at 1x, 2x and 4x of a size, on the loopback endpoint
with a hosted endpoint's latency (issue 39).

Each *job* is one history rollout cell, run as the pipeline runs it: its own Python process
calling :func:`memtrials.studies.history.rollouts.rollout_cell` (environment pool, recording
client, the one runner, the episode / step / call Parquet), on real environments, with the
preset's actor (``config/presets/history-paper.yaml`` by default: react mode, 30 actions an
episode, every admissible action listed, 32 episodes in flight) and its step cap used up (the
loopback answers with the first listed action, and only a finished task ends an episode
early).  The endpoint is the loopback server in its own process (as a hosted endpoint would
be), answering after ``--latency`` seconds, ``--slots`` requests at once, and reporting
``prompt_tokens_details.cached_tokens`` as a provider's prefix cache would
(:class:`memtrials.testing.LoopbackServer`'s ``prefix_cache``).  Each job has a response cache of
its own (SQLite, as a one-machine run), so nothing replays between jobs and its bytes are the job's.

**The environment is ALFWorld by default** (the pipeline's 314 generated games, every split, the
task types in turn): its steps are cheap (a few ms of CPU), so the ratio measures the pipeline
(runner, client, recorder, Parquet) and not the machine's cores.  ScienceWorld (``--env
scienceworld``) spends ~70-95 ms of CPU in its JVM a step over its long listings: 32 episodes in
flight at 1 s need 32 steps/s, more than 2 cores can give; its figures are the machine's.  WebShop
and AppWorld run too (for the prefix figures).  Every job's environments are timed inside their own
calls (``bench_runner.TimedEnv``), and the ratio is given both to the model-bound ideal and to the
ideal with the engines' measured time added, as ``bench_runner.py`` does.

Sizes: ``--episodes`` per job at 1x (default 50, a tenth of the preset's 500 tasks a cell), then
2x and 4x (the first 50, 100, 200 tasks of one order: the same mix of task types); per size one job
per ``--conditions`` entry (non-shuffled history conditions).  Per job:

- episodes/s over the job's model-bound phase (first request sent to last reply, from the call
  records) against the ideal ``min(E, slots, N) / (actions an episode x latency)`` (in flight x
  latency), as a ratio (target >= 0.90), and against the ideal with the engines' time
  ``max(n x latency / C, (n x latency + engine time) / E)`` for ``n`` steps; beside it the bound
  that whole episodes in the job's request order (``--request-order``, config ``request.order``)
  put on the ratio (``bound``: the job's episodes, their measured requests each, played on the
  virtual clock of :mod:`memtrials.testing.schedule`, every request one latency).  First-come
  requests move episodes admitted together in lock-step waves, so 0.78 at N = 50, E = C = 32
  (with E = C the last wave leaves slots idle) and 0.89 at N = 200, E = 64, C = 32 (a last wave
  of 8 episodes); the progress order (:mod:`memtrials.agent.order`) 1.00 at E = 2C;
- job overhead: the share of the job's wall time (process start to exit, measured by this
  process) outside that phase (interpreter and imports, pool and client set-up, the first
  environment resets, writing Parquet);
- peak memory of the job's process (its own ``VmHWM``, not ``ru_maxrss``, which a child inherits
  from its parent: :func:`own_peak_kb`; environment child processes and ScienceWorld's
  shared JVMs are processes of their own and not counted) and the job's CPU seconds (with its
  reaped children's);
- Parquet bytes (episodes + steps + calls) and response-cache bytes (SQLite file and WAL) per
  episode.

Then, per condition, whether each figure grows linearly with the work: wall time per episode,
peak memory and bytes per episode at 2x and 4x as ratios to 1x (flat = 1.00; targets: memory flat
in episodes per job, bytes per episode constant).  Last, prompt-prefix reuse at these episode
lengths: per condition the share of actor prompt tokens (the loopback's count) that repeat the
previous prompt's prefix (the same episode's previous step; an episode's first prompt against the
cell's previous prompt), and the share the loopback's prefix cache reported as cached in the
records (target >= 90 %), with the same share for the prompts rewritten into the two other
layouts of ``bench_prefix_share.py --layouts`` (block format only).  ``--profile`` runs each job
under cProfile and prints its top functions by own time.

    python benchmarks/bench_scale.py [--env alfworld] [--env-root DIR] [--conditions raw causal]
        [--episodes 50] [--sizes 1 2 4] [--latency 1.0] [--inflight 32] [--slots 32] [--steps 30]
        [--request-order progress|fifo]
        [--preset PATH] [--keep DIR] [--profile]
    python benchmarks/bench_scale.py --prefix-only DIR      # the prefix figures of the jobs kept in DIR
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

from scale_prefix import pct, prefix_only, prefix_reuse

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

# ScienceWorld tasks with hundreds of variations each (4x of 50 episodes needs 200 distinct tasks)
SCIENCEWORLD = ["find-non-living-thing", "find-living-thing", "find-plant", "find-animal"]
TARGET_RATIO, TARGET_PREFIX = 0.90, 0.90


ROOTS = {"alfworld": REPO / "resources" / "alfworld" / "games", "appworld": REPO / "resources" / "appworld",
         "webshop": None}
"""Each environment's data as the pipeline builds it (``snakemake --cores 2 resources/alfworld/games.parquet``,
``resources/appworld/tasks.parquet``; WebShop's ships in ``data/webshop``); ``--env-root`` names another."""


def _rows(env: str, root: Path | None) -> list[dict]:
    if env == "webshop":
        from memtrials.envs.webshop.splits import task_rows

        return list(task_rows(root, with_capped=False))
    if root is None or not root.is_dir():
        raise SystemExit(f"bench_scale: no {env} data at {root}: build it with the pipeline "
                         f"(snakemake --cores 2 resources/{env}/...) or pass --env-root")
    if env == "alfworld":
        from memtrials.envs.alfworld.env import task_rows

        return task_rows(root)
    import pandas as pd

    return pd.read_parquet(root / "tasks.parquet").to_dict("records")


def task_ids(env: str, n: int, root: Path | None = None) -> list[str]:
    """The first ``n`` tasks of one fixed order that takes the task types in turn: every size
    plays the same mix of types (bytes per episode compare) and a larger size's tasks include a
    smaller one's (each job has a response cache of its own: nothing replays between jobs).
    ScienceWorld: variations of :data:`SCIENCEWORLD`; the others: their task tables under ``root``
    (every split)."""
    if env == "scienceworld":
        return [f"{SCIENCEWORLD[i % len(SCIENCEWORLD)]}:{i // len(SCIENCEWORLD)}" for i in range(n)]
    if env not in ROOTS:
        raise SystemExit(f"bench_scale: unsupported environment {env!r} ({', '.join(['scienceworld', *ROOTS])})")
    types = {str(r["task_id"]): str(r["type"]) for r in _rows(env, root)}
    by_type: dict[str, list[str]] = {}
    for tid in sorted(types, key=lambda t: (0, int(t), "") if t.isdigit() else (1, 0, t)):  # goal numbers in order
        by_type.setdefault(types[tid], []).append(tid)
    order = [ids[k] for k in range(max(map(len, by_type.values()))) for _, ids in sorted(by_type.items())
             if k < len(ids)]
    if len(order) < n:
        raise SystemExit(f"bench_scale: {n} episodes need {n} distinct {env} tasks; {root} has {len(order)}")
    return order[:n]


# -- the job (a child process) -----------------------------------------------------------------
def own_peak_kb() -> int:
    """This process's own peak resident memory (``VmHWM``).  Not ``ru_maxrss``: a process started
    by ``subprocess`` reports at least its parent's high-water mark at the start (Linux keeps it
    across ``exec``), and this benchmark's driver grows as it reads each finished job's Parquet."""
    with open("/proc/self/status") as fh:
        return int(next(ln for ln in fh if ln.startswith("VmHWM:")).split()[1])


def job(spec_path: str) -> None:
    """One rollout cell from ``spec_path`` (JSON); prints its own figures as one JSON line (and,
    with ``profile``, the top of a cProfile of the whole cell)."""
    spec = json.loads(Path(spec_path).read_text())
    from bench_runner import TimedEnv

    from memtrials.envs.pool import env_factory
    from memtrials.envs.process.forkserver import configure as configure_forks
    from memtrials.envs.scienceworld.env import configure as configure_scienceworld
    from memtrials.studies.history.design import actor_settings
    from memtrials.studies.history.rollouts import rollout_cell

    out = Path(spec["out"])
    # as a pipeline job does (memtrials.pipeline.rule_entry.run_rule): ALFWorld / AppWorld children
    # forked from a warm per-machine process, ScienceWorld's shared JVMs and joined listing
    configure_forks(spec["config"])
    configure_scienceworld(spec["config"])
    settings = actor_settings("loop", spec["condition"], spec["actor"])
    spent = [0.0]  # seconds inside the environments' own calls (bench_runner.TimedEnv)
    make = env_factory(spec["env"], spec["env_options"])
    cell = rollout_cell(
        spec["config"], model="loop", env=spec["env"], condition=spec["condition"], tasks=spec["tasks"],
        seeds=list(range(len(spec["tasks"]))), settings=settings, actor_prompts_dir=str(REPO / "config/prompts/actor"),
        in_flight=spec["in_flight"], out_episodes=str(out / "episodes.parquet"), out_steps=str(out / "steps.parquet"),
        out_calls=str(out / "calls.parquet"), env_options=spec["env_options"], make_env=lambda: TimedEnv(make(), spent))
    samples: list[tuple[float, int]] = []  # (time, resident KB) every 0.2 s: memory during the phase and after
    stop = threading.Event()

    def sample() -> None:
        page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
        while not stop.wait(0.2):
            with open("/proc/self/statm") as fh:
                samples.append((time.time(), int(fh.read().split()[1]) * page_kb))

    threading.Thread(target=sample, daemon=True).start()
    if spec.get("profile"):
        import cProfile
        import io
        import pstats

        prof = cProfile.Profile()
        prof.runcall(asyncio.run, cell)
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(14)
        (out / "profile.txt").write_text(text.getvalue())
    else:
        asyncio.run(cell)
    stop.set()
    ru, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print("JOB " + json.dumps({"rss_kb": own_peak_kb(), "samples": samples, "cpu_s": ru.ru_utime + ru.ru_stime, "env_s": spent[0],
                               "children_cpu_s": kids.ru_utime + kids.ru_stime}), flush=True)


# -- the driver --------------------------------------------------------------------------------
def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "memtrials.testing.serve", "--port", "0", "--prefix-cache", "64",
         "--faults", json.dumps({"latency_s": latency})],
        stdout=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    return proc, proc.stdout.readline().split()[1]


def make_config(work: Path, base_url: str, slots: int) -> dict:
    import yaml

    from memtrials.testing import loopback_endpoint

    class Srv:
        model = "loopback-model"

    Srv.base_url = base_url
    models = work / "models.yaml"
    # the loopback's max_tokens only caps its replies (the policy's are a few words)
    entry = loopback_endpoint(Srv, max_concurrency=slots)
    models.write_text(yaml.safe_dump({"endpoints": {"loop": entry}}))
    cfg = yaml.safe_load((REPO / "config" / "config.yaml").read_text())
    cfg.update(models_file=str(models), panel=["loop"], roles={})
    return cfg


def cache_bytes(cfg: dict) -> int:
    path = Path(cfg["cache"]["path"])
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def stamp(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def run_job(cfg: dict, work: Path, args: argparse.Namespace, actor: dict, env_options: dict,
            condition: str, size: int) -> dict:
    import pandas as pd

    n = args.episodes * size
    out = work / f"{condition}-x{size}"
    out.mkdir(parents=True)
    # a response cache of the job's own (SQLite, as a one-machine run): its bytes are the job's; one
    # folder for all, so the jobs share the machine's environment fork servers as a run's do
    cfg = {**cfg, "cache": {"path": str(work / "cache" / f"{out.name}.sqlite"), "mode": "use", "backend": "sqlite"},
           "request": {**cfg["request"], "order": args.request_order}}
    spec = {"config": cfg, "env": args.env, "condition": condition, "actor": actor, "env_options": env_options,
            "in_flight": args.inflight, "out": str(out), "profile": args.profile,
            "tasks": task_ids(args.env, n, args.env_root)}
    spec_path = out / "spec.json"
    spec_path.write_text(json.dumps(spec))
    before = cache_bytes(cfg)
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, __file__, "--job", str(spec_path)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(REPO / "src")))
    wall = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"job {condition} x{size} failed:\n{done.stderr[-3000:]}")
    figures = json.loads(next(ln for ln in done.stdout.splitlines() if ln.startswith("JOB "))[4:])
    calls = pd.read_parquet(out / "calls.parquet")
    steps = pd.read_parquet(out / "steps.parquet")
    phase = stamp(calls["finished_at"].max()) - stamp(calls["started_at"].min())
    last = stamp(calls["finished_at"].max())
    in_phase = [kb for t, kb in figures["samples"] if t <= last] or [0]
    after = [kb for t, kb in figures["samples"] if t > last] or [0]
    c = min(args.inflight, args.slots, n)  # requests that can be in flight at once
    ideal = len(steps) * args.latency / c
    # the ideal with the engines' own time (bench_runner.py): a step costs latency + engine time,
    # E episodes at a time
    with_env = max(ideal, (len(steps) * args.latency + figures["env_s"]) / args.inflight)
    # the best the job's order can do with its episodes (their measured requests, in the order they were
    # started), every request one latency (memtrials.testing.schedule); first-come requests move episodes
    # admitted together in lock-step waves: 0.78 of the ideal at E = C = 32 and N = 50, 0.89 at E = 64,
    # C = 32 and N = 200 (3 waves of 64, one of 8 that runs its 30 steps on 32 slots); the progress order
    # (memtrials.agent.order) 1.00 at both
    from memtrials.testing.schedule import ideal_ticks, job_ticks

    started = {t: k for k, t in enumerate(spec["tasks"])}
    per_episode = steps.groupby("episode_id").agg(task=("task_id", "first"), n=("step", "size"))
    lengths = [int(x) for x in per_episode.sort_values("task", key=lambda col: col.map(started))["n"]]
    bound = ideal_ticks(lengths, c) / job_ticks(lengths, args.inflight, args.slots, args.request_order)
    parquet = sum((out / f).stat().st_size for f in ("episodes.parquet", "steps.parquet", "calls.parquet"))
    return {"condition": condition, "size": size, "episodes": n, "steps": len(steps), "wall_s": wall,
            "phase_s": phase, "ratio": ideal / phase, "eps_per_s": n / phase, "ideal_eps_per_s": n / ideal,
            "ratio_env": with_env / phase, "bound": bound, "env_ms": 1000 * figures["env_s"] / max(1, len(steps)),
            "overhead": (wall - phase) / wall, "rss_mb": figures["rss_kb"] / 1024,
            "rss_phase_mb": max(in_phase) / 1024, "rss_after_mb": max(after) / 1024,
            "cpu_s": figures["cpu_s"] + figures["children_cpu_s"],
            "parquet_per_ep": parquet / n, "cache_per_ep": (cache_bytes(cfg) - before) / n,
            "prefix": prefix_reuse(calls, steps, condition)}


def report(rows: list[dict], args: argparse.Namespace) -> None:
    print(f"{'cond':8} {'size':>4} {'eps':>4} {'steps':>5} {'wall s':>7} {'phase s':>7} {'eps/s':>6} "
          f"{'ideal':>6} {'ratio':>5} {'bound':>5} {'w/eng':>5} {'eng ms':>6} {'overhd':>6} {'peak MB':>7} {'CPU s':>6} {'pq B/ep':>8} {'cache B/ep':>10} "
          f"{'prefix':>6} {'served':>6} {'words':>6} {'lay(a)':>6} {'lay(b)':>6} {'bound':>6}")
    for r in rows:
        p = r["prefix"]
        print(f"{r['condition']:8} {r['size']:>3}x {r['episodes']:4d} {r['steps']:5d} {r['wall_s']:7.1f} "
              f"{r['phase_s']:7.1f} {r['eps_per_s']:6.3f} {r['ideal_eps_per_s']:6.3f} {r['ratio']:5.2f} "
              f"{r['bound']:5.2f} {r['ratio_env']:5.2f} {r['env_ms']:6.1f} "
              f"{r['overhead']:6.1%} {r['rss_mb']:7.0f} {r['cpu_s']:6.1f} {r['parquet_per_ep']:8.0f} "
              f"{r['cache_per_ep']:10.0f} {p['repeated']:6.1%} {p['served']:6.1%} {p['prompt_words']:6.0f} "
              f"{pct(p['layout_a'])} {pct(p['layout_b'])} {pct(p['bound'])}")
    for cond in args.conditions:
        mine = {r["size"]: r for r in rows if r["condition"] == cond}
        base = mine[min(mine)]

        def growth(key: str, per_episode: bool = False) -> str:
            return " ".join(f"{(mine[s][key] / mine[s]['episodes'] if per_episode else mine[s][key]) / max(1e-9, (base[key] / base['episodes'] if per_episode else base[key])):.2f}"
                            for s in sorted(mine) if s != min(mine))

        worst = min(r["ratio"] for r in mine.values())
        print(f"{cond}: vs {min(mine)}x at {', '.join(f'{s}x' for s in sorted(mine) if s != min(mine))}: "
              f"wall per episode {growth('wall_s', True)}; peak memory {growth('rss_mb')}; "
              f"Parquet bytes per episode {growth('parquet_per_ep')}; cache bytes per episode {growth('cache_per_ep')} "
              f"(linear = 1.00); throughput ratio min {worst:.2f} (target >= {TARGET_RATIO:.2f}: "
              f"{'met' if worst >= TARGET_RATIO else 'NOT met'}); prefix reuse "
              f"{min(r['prefix']['repeated'] for r in mine.values()):.1%} (target >= {TARGET_PREFIX:.0%}: "
              f"{'met' if min(r['prefix']['repeated'] for r in mine.values()) >= TARGET_PREFIX else 'NOT met'})")


def main() -> None:
    from memtrials.agent.order import REQUEST_ORDERS

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--job", help=argparse.SUPPRESS)
    ap.add_argument("--preset", type=Path, default=REPO / "config/presets/history-paper.yaml")
    ap.add_argument("--env", default="alfworld", choices=["alfworld", "scienceworld", "webshop", "appworld"])
    ap.add_argument("--env-root", type=Path, default=None,
                    help="the environment's data (default: the pipeline's, bench_scale.ROOTS)")
    ap.add_argument("--profile", action="store_true", help="cProfile each job (its top in <job>/profile.txt)")
    ap.add_argument("--conditions", nargs="+", default=["raw", "causal"])
    ap.add_argument("--episodes", type=int, default=50, help="episodes per job at 1x (the preset's 500 / 10)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--latency", type=float, default=1.0, help="seconds per request (a hosted endpoint's)")
    ap.add_argument("--inflight", type=int, default=None, help="episodes in flight (default: the preset's in_flight)")
    ap.add_argument("--slots", type=int, default=None, help="the endpoint's max_concurrency (default: --inflight)")
    ap.add_argument("--request-order", choices=REQUEST_ORDERS, default=None,
                    help="the jobs' request.order (default: config/config.yaml's)")
    ap.add_argument("--steps", type=int, default=None, help="actions an episode (default: the preset's max_actions)")
    ap.add_argument("--keep", type=Path, default=None, help="keep the jobs' outputs in this folder")
    ap.add_argument("--prefix-only", type=Path, default=None,
                    help="only the prefix-reuse figures of the jobs kept in this folder (--keep of an earlier run)")
    args = ap.parse_args()
    if args.job:
        return job(args.job)
    if args.prefix_only:
        return prefix_only(args.prefix_only)
    import yaml

    preset = yaml.safe_load(args.preset.read_text())["history"]
    base = yaml.safe_load((REPO / "config/config.yaml").read_text())["history"]
    actor = {**base["actor"], **preset.get("actor", {})}
    actor["max_actions"] = args.steps or actor["max_actions"]
    args.inflight = args.inflight or preset.get("in_flight", base["in_flight"])
    args.slots = args.slots or args.inflight
    args.request_order = args.request_order or yaml.safe_load((REPO / "config/config.yaml").read_text())["request"]["order"]
    env_options = {**base.get("env_options", {}), **preset.get("env_options", {})}.get(args.env, {})
    args.env_root = args.env_root or ROOTS.get(args.env)
    if args.env_root is not None:
        env_options = {**env_options, "root": str(args.env_root.resolve())}
    task_ids(args.env, args.episodes * max(args.sizes), args.env_root)  # enough tasks, before any job
    if sorted(set(args.sizes)) != sorted(args.sizes) or min(args.sizes) < 1:
        raise SystemExit("bench_scale: --sizes must be distinct and >= 1 (each size plays its own tasks)")
    print(f"bench_scale: {args.preset.name} shape: {args.env}, {actor['mode']} mode, {actor['max_actions']} actions an "
          f"episode, max_listed_actions {actor.get('max_listed_actions')}; {args.episodes} episodes a job at 1x, sizes "
          f"{args.sizes}; E {args.inflight} in flight, C {args.slots} endpoint slots, request order {args.request_order}, "
          f"latency {args.latency:.2f} s; "
          f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    server, base_url = start_server(args.latency)
    rows = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
            work = args.keep or Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            cfg = make_config(work, base_url, args.slots)
            for size in args.sizes:
                for cond in args.conditions:
                    rows.append(run_job(cfg, work, args, actor, env_options, cond, size))
                    r = rows[-1]
                    print(f"  {cond} x{size}: {r['episodes']} episodes, {r['wall_s']:.1f} s wall, ratio {r['ratio']:.2f}; "
                          f"resident MB at most {r['rss_phase_mb']:.0f} while playing, {r['rss_after_mb']:.0f} after "
                          f"(writing the tables, closing)", flush=True)
                    if args.profile:
                        top = (work / f"{cond}-x{size}" / "profile.txt").read_text().splitlines()
                        print("\n".join("    " + ln for ln in top if ln.strip())[:4000], flush=True)
            from memtrials.llm.local.shared import stop_all

            stop_all(work / "cache" / "servers")  # the environment fork servers, as at a run's end
    finally:
        server.terminate()
        server.wait()
    report(rows, args)
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
