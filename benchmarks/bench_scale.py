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
(:class:`memtrials.testing.LoopbackServer`'s ``prefix_cache``).  Every job shares one response
cache (SQLite, as a one-machine run).

Sizes: ``--episodes`` per job at 1x (default 50, a tenth of the preset's 500 tasks a cell), then
2x and 4x; per size one job per ``--conditions`` entry (non-shuffled history conditions).  Per job:

- episodes/s over the job's model-bound phase (first request sent to last reply, from the call
  records) against the ideal ``min(E, slots) / (actions an episode x latency)`` (in flight x
  latency), as a ratio (target >= 0.90);
- job overhead: the share of the job's wall time (process start to exit, measured by this
  process) outside that phase (interpreter and imports, pool and client set-up, the first
  environment resets, writing Parquet);
- peak memory of the job's process (``ru_maxrss``; ScienceWorld's JVMs are processes of their
  own, shared per machine, and not counted);
- Parquet bytes (episodes + steps + calls) and response-cache bytes (SQLite file and WAL growth)
  per episode.

Then, per condition, whether each figure grows linearly with the work: wall time per episode,
overhead, peak memory and bytes per episode at 2x and 4x as ratios to 1x (flat = 1.00; targets:
memory flat in episodes per job, bytes per episode constant).  Last, prompt-prefix reuse at these
episode lengths: per condition the share of actor prompt tokens (the loopback's count) that
repeat the previous prompt's prefix (the same episode's previous step; an episode's first
prompt against the cell's previous prompt), and the share the loopback's prefix cache reported
as cached in the records (target >= 90 %), with the same share for the prompts rewritten into
the two other layouts of ``bench_prefix_share.py --layouts`` (block format only).

    python benchmarks/bench_scale.py [--env scienceworld] [--conditions raw causal] [--episodes 50]
        [--sizes 1 2 4] [--latency 1.0] [--inflight 32] [--slots 32] [--steps 30] [--preset PATH]
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
import time
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

# ScienceWorld tasks with hundreds of variations each (4x of 50 episodes needs 200 distinct tasks)
SCIENCEWORLD = ["find-non-living-thing", "find-living-thing", "find-plant", "find-animal"]
TARGET_RATIO, TARGET_PREFIX = 0.90, 0.90


def task_ids(env: str, episodes: int, size: int) -> list[str]:
    """The tasks of the job of ``size`` x ``episodes``: the task types in turn (every size the same
    mix, so that bytes per episode compare), variations no other size of the run plays (no
    response-cache replays between sizes)."""
    if env != "scienceworld":
        raise SystemExit(f"bench_scale: unsupported environment {env!r} (scienceworld)")
    names = SCIENCEWORLD
    offset = (size - 1) * -(-episodes // len(names))
    return [f"{names[i % len(names)]}:{offset + i // len(names)}" for i in range(episodes * size)]


# -- the job (a child process) -----------------------------------------------------------------
def job(spec_path: str) -> None:
    """One rollout cell from ``spec_path`` (JSON); prints its own figures as one JSON line."""
    spec = json.loads(Path(spec_path).read_text())
    from memtrials.studies.history.design import actor_settings
    from memtrials.studies.history.rollouts import rollout_cell

    out = Path(spec["out"])
    settings = actor_settings("loop", spec["condition"], spec["actor"])
    asyncio.run(rollout_cell(
        spec["config"], model="loop", env=spec["env"], condition=spec["condition"], tasks=spec["tasks"],
        seeds=list(range(len(spec["tasks"]))), settings=settings, actor_prompts_dir=str(REPO / "config/prompts/actor"),
        in_flight=spec["in_flight"], out_episodes=str(out / "episodes.parquet"), out_steps=str(out / "steps.parquet"),
        out_calls=str(out / "calls.parquet"), env_options=spec["env_options"]))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    print("JOB " + json.dumps({"rss_kb": ru.ru_maxrss, "cpu_s": ru.ru_utime + ru.ru_stime}), flush=True)


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
    cfg.update(models_file=str(models), panel=["loop"], roles={},
               cache={"path": str(work / "cache" / "llm.sqlite"), "mode": "use", "backend": "sqlite"})
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
    spec = {"config": cfg, "env": args.env, "condition": condition, "actor": actor, "env_options": env_options,
            "in_flight": args.inflight, "out": str(out),
            "tasks": task_ids(args.env, args.episodes, size)}
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
    c = min(args.inflight, args.slots)
    ideal = len(steps) * args.latency / c
    parquet = sum((out / f).stat().st_size for f in ("episodes.parquet", "steps.parquet", "calls.parquet"))
    return {"condition": condition, "size": size, "episodes": n, "steps": len(steps), "wall_s": wall,
            "phase_s": phase, "ratio": ideal / phase, "eps_per_s": n / phase, "ideal_eps_per_s": n / ideal,
            "overhead": (wall - phase) / wall, "rss_mb": figures["rss_kb"] / 1024, "cpu_s": figures["cpu_s"],
            "parquet_per_ep": parquet / n, "cache_per_ep": (cache_bytes(cfg) - before) / n,
            "prefix": prefix_reuse(calls, steps, condition)}


def repeated_share(order, texts: dict[str, str]) -> float:
    """Share of the prompts' words (the loopback's tokens) that repeat the previous prompt's prefix:
    the same episode's previous step, an episode's first prompt against the one sent before it."""
    from memtrials.testing.prefix import common_prefix, whole_words

    total = repeated = 0
    prev_by_ep: dict[str, str] = {}
    last_sent = ""
    for row in order.itertuples():
        text = texts[row.call_id]
        prev = prev_by_ep.get(row.episode_id, last_sent)
        total += len(text.split())
        repeated += whole_words(text, common_prefix(prev, text))
        prev_by_ep[row.episode_id] = last_sent = text
    return repeated / max(1, total)


def prefix_reuse(calls, steps, condition: str) -> dict:
    """Prefix reuse of a cell's actor prompts (:func:`repeated_share`) as sent and in the two other
    layouts of ``bench_prefix_share.py --layouts`` ((a) the current observation as the newest
    history entry, (b) also the response instruction above the history), and the share of prompt
    tokens the loopback's prefix cache reported as cached (the records' ``cached_tokens``)."""
    from bench_prefix_share import prompt_text, rewrite

    actor = calls[calls["purpose"].astype(str) == "actor"].set_index("call_id")
    order = steps.sort_values(["episode_id", "step"])
    texts = {cid: prompt_text(raw) for cid, raw in actor["messages"].items()}
    out = {"repeated": repeated_share(order, texts)}
    for name, first in (("layout_a", False), ("layout_b", True)):
        moved = {cid: rewrite(t, condition, first) for cid, t in texts.items()}
        out[name] = None if any(v is None for v in moved.values()) else repeated_share(order, moved)
    out["served"] = float(actor["cached_tokens"].fillna(0).sum() / max(1, actor["prompt_tokens"].fillna(0).sum()))
    out["prompt_words"] = sum(len(t.split()) for t in texts.values()) / max(1, len(texts))
    return out


def _pct(x: float | None) -> str:
    return f"{x:6.1%}" if x is not None else f"{'-':>6}"


def report(rows: list[dict], args: argparse.Namespace) -> None:
    print(f"{'cond':8} {'size':>4} {'eps':>4} {'steps':>5} {'wall s':>7} {'phase s':>7} {'eps/s':>6} "
          f"{'ideal':>6} {'ratio':>5} {'overhd':>6} {'peak MB':>7} {'CPU s':>6} {'pq B/ep':>8} {'cache B/ep':>10} "
          f"{'prefix':>6} {'served':>6} {'words':>6} {'lay(a)':>6} {'lay(b)':>6}")
    for r in rows:
        p = r["prefix"]
        print(f"{r['condition']:8} {r['size']:>3}x {r['episodes']:4d} {r['steps']:5d} {r['wall_s']:7.1f} "
              f"{r['phase_s']:7.1f} {r['eps_per_s']:6.3f} {r['ideal_eps_per_s']:6.3f} {r['ratio']:5.2f} "
              f"{r['overhead']:6.1%} {r['rss_mb']:7.0f} {r['cpu_s']:6.1f} {r['parquet_per_ep']:8.0f} "
              f"{r['cache_per_ep']:10.0f} {p['repeated']:6.1%} {p['served']:6.1%} {p['prompt_words']:6.0f} "
              f"{_pct(p['layout_a'])} {_pct(p['layout_b'])}")
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


def prefix_only(folder: Path) -> None:
    """``--prefix-only``: the prefix figures of every job kept under ``folder``."""
    import pandas as pd

    for out in sorted(p for p in folder.iterdir() if (p / "calls.parquet").is_file()):
        condition = out.name.rsplit("-x", 1)[0]
        p = prefix_reuse(pd.read_parquet(out / "calls.parquet"), pd.read_parquet(out / "steps.parquet"), condition)
        print(f"{out.name:14} prefix {p['repeated']:6.1%} served {p['served']:6.1%} words/prompt {p['prompt_words']:6.0f} "
              f"layout (a) {_pct(p['layout_a'])} (b) {_pct(p['layout_b'])}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--job", help=argparse.SUPPRESS)
    ap.add_argument("--preset", type=Path, default=REPO / "config/presets/history-paper.yaml")
    ap.add_argument("--env", default="scienceworld")
    ap.add_argument("--conditions", nargs="+", default=["raw", "causal"])
    ap.add_argument("--episodes", type=int, default=50, help="episodes per job at 1x (the preset's 500 / 10)")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--latency", type=float, default=1.0, help="seconds per request (a hosted endpoint's)")
    ap.add_argument("--inflight", type=int, default=None, help="episodes in flight (default: the preset's in_flight)")
    ap.add_argument("--slots", type=int, default=None, help="the endpoint's max_concurrency (default: --inflight)")
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
    env_options = {**base.get("env_options", {}), **preset.get("env_options", {})}.get(args.env, {})
    if sorted(set(args.sizes)) != sorted(args.sizes) or min(args.sizes) < 1:
        raise SystemExit("bench_scale: --sizes must be distinct and >= 1 (each size plays its own tasks)")
    print(f"bench_scale: {args.preset.name} shape: {args.env}, {actor['mode']} mode, {actor['max_actions']} actions an "
          f"episode, max_listed_actions {actor.get('max_listed_actions')}; {args.episodes} episodes a job at 1x, sizes "
          f"{args.sizes}; E {args.inflight} in flight, C {args.slots} endpoint slots, latency {args.latency:.2f} s; "
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
                    print(f"  {cond} x{size}: {r['episodes']} episodes, {r['wall_s']:.1f} s wall, ratio {r['ratio']:.2f}",
                          flush=True)
    finally:
        server.terminate()
        server.wait()
    report(rows, args)
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
