"""Which embedded model and tasks make the default history run show something: success per minute.

Real episodes through the history study's own cell (:func:`memtrials.studies.history.
rollouts.rollout_cell`, condition Raw unless ``--condition`` names another, the default
config's actor settings with the
action budget and listed actions given here) for each (model, environment, task type):
``--episodes`` tasks of that type from the history split of the task table, drawn by
the history seed.  Every model call is fresh (a new cache in a temporary folder); one
shared embedded server per model is started and warmed before the clock starts, so the
figures are per episode, not per server start.

Printed per (model, env, type): episodes, successes, success per episode, wall time,
episodes/min, successes/min, and the tokens (prompt, of which served from llama.cpp's
prefix cache, and the prefix ceiling: the mean share of a prompt's characters that it
shares as a prefix with an earlier prompt of the cell, what a perfect prefix cache
could serve; completion) with the load average (``os.getloadavg``) at start and end:
on a shared machine wall time moves with the load, counts and token shares do not.
The last line is the figure: successes per minute per model, over all its cells.

    python benchmarks/bench_default_choice.py [--models smollm2 qwen-coder-0.5b]
        [--cells scienceworld:lifespan-longest-lived alfworld:pick_and_place_simple ...]
        [--episodes 2] [--max-actions 6] [--listed 10] [--simplification easy]
        [--tasks-dir results/tasks]

The task tables come from the pipeline (``snakemake results/tasks/scienceworld.parquet
results/tasks/alfworld.parquet``); ALFWorld also needs its generated games
(``resources/alfworld/games``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from bench_prefix_share import prefix_ceiling  # noqa: E402  (the same ceiling, read from call records)

DEFAULT_CELLS = (
    "scienceworld:lifespan-longest-lived", "scienceworld:find-living-thing",
    "alfworld:pick_and_place_simple", "alfworld:look_at_obj_in_light",
)


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def pick_tasks(tasks_dir: Path, env: str, typ: str, split: str, n: int, seed: int) -> list[str]:
    import pandas as pd

    from memtrials.envs.tasks import select_tasks

    path = tasks_dir / f"{env}.parquet"
    if not path.exists():
        sys.exit(f"{path}: missing. Fix: snakemake --cores 2 {path}")
    df = pd.read_parquet(path)
    df = df[df["type"].astype(str) == typ]
    if df.empty:
        sys.exit(f"{path}: no task of type {typ!r}")
    return select_tasks(df, min(n, int((df["split"] == split).sum())), split, seed, str(path))


async def warm(config: dict, model: str) -> None:
    from memtrials.llm import open_client

    async with open_client(config, f"bench/warm/{model}") as client:
        await client.complete(model, [{"role": "user", "content": "Say OK."}], max_tokens=2, purpose="warm")


async def run_cell(config: dict, model: str, env: str, typ: str, tasks: list[str], args, out: Path) -> dict:
    import pandas as pd

    from memtrials.seeds import seed_of
    from memtrials.studies.history.design import actor_settings
    from memtrials.studies.history.rollouts import rollout_cell

    h = config["history"]
    actor = dict(h["actor"], max_actions=args.max_actions, max_listed_actions=args.listed)
    if getattr(args, "listing", None):
        actor["listing"] = args.listing
    settings = actor_settings(model, args.condition, actor, shuffle=h["shuffle"])
    options = {"simplification": args.simplification} if env == "scienceworld" and args.simplification else {}
    if env == "alfworld":
        options = {"root": str(args.alfworld_root)}
    stem = out / f"{model}-{env}-{typ}"
    start_load, t0 = load(), time.monotonic()
    episodes = await rollout_cell(
        config, model=model, env=env, condition=args.condition, tasks=tasks,
        seeds=[seed_of(int(h["seed"]), env, t) for t in tasks], settings=settings,
        actor_prompts_dir=str(REPO / h["actor_prompts_dir"]), in_flight=args.in_flight,
        out_episodes=f"{stem}.parquet", out_steps=f"{stem}.steps.parquet", out_calls=f"{stem}.calls.parquet",
        env_options=options)
    wall = time.monotonic() - t0
    calls = pd.read_parquet(f"{stem}.calls.parquet")
    steps = pd.read_parquet(f"{stem}.steps.parquet")
    won = int(episodes["won"].sum())
    return {"model": model, "env": env, "type": typ, "episodes": len(episodes), "won": won,
            "steps": len(steps), "wall_s": wall, "prompt": int(calls["prompt_tokens"].sum()),
            "cached": int(calls["cached_tokens"].sum()), "completion": int(calls["completion_tokens"].sum()),
            "ceiling": prefix_ceiling(calls),
            "load": f"{start_load} -> {load()}"}


def bench_config(args, work: Path) -> dict:
    """The default config, the panel set to the models compared, a fresh cache in ``work``
    (read again for every cell: a long run outlives edits of config.yaml and its schema)."""
    import yaml

    with open(REPO / "config" / "config.yaml") as fh:
        config = yaml.safe_load(fh)
    config.update(models_file=str(REPO / "config" / "models.yaml"), panel=list(args.models),
                  cache={"path": str(work / "llm.sqlite"), "mode": "use", "backend": "sqlite"},
                  servers={**config.get("servers", {}), "shared": True, "idle_s": 600})
    return config


async def main_async(args) -> None:
    work = Path(tempfile.mkdtemp(prefix="bench-default-"))
    config = bench_config(args, work)
    splits = config["history"]["splits"]
    rows: list[dict] = []
    try:
        await run_all(args, config, work, splits, rows)
    finally:
        from memtrials.llm.local.shared import server_dir, stop_all

        stop_all(server_dir(config))
    print(f"\nsettings: {args.episodes} episodes per cell, max_actions {args.max_actions}, listed {args.listed}, "
          f"ScienceWorld simplification {args.simplification!r}; work folder {work}")
    figure = []
    for model in args.models:
        mine = [r for r in rows if r["model"] == model]
        wall = max(1e-9, sum(r["wall_s"] for r in mine))
        won, n = sum(r["won"] for r in mine), sum(r["episodes"] for r in mine)
        cells = sum(1 for r in mine if r["won"])
        figure.append(f"{model} {won}/{n} won ({cells}/{len(mine)} cells non-zero), "
                      f"{60 * won / wall:.3f} successes/min, {60 * n / wall:.2f} episodes/min")
    print("success per minute: " + "; ".join(figure))


async def run_all(args, config: dict, work: Path, splits: dict, rows: list[dict]) -> None:
    for model in args.models:
        t0 = time.monotonic()
        await warm(config, model)
        print(f"{model}: server started and warm in {time.monotonic() - t0:.0f} s (load {load()})", flush=True)
        for cell in args.cells:
            env, _, typ = cell.partition(":")
            seed = args.seed if args.seed is not None else int(config["history"]["seed"])
            tasks = pick_tasks(args.tasks_dir, env, typ, splits[env], args.episodes, seed)
            r = await run_cell(bench_config(args, work), model, env, typ, tasks, args, work)
            rows.append(r)
            print(f"{model:16s} {env:12s} {typ:32s} {r['won']}/{r['episodes']} won, {r['steps']} steps, "
                  f"{r['wall_s']:.0f} s, {60 * r['episodes'] / r['wall_s']:.2f} episodes/min, "
                  f"{60 * r['won'] / r['wall_s']:.2f} successes/min; tokens: prompt {r['prompt']} "
                  f"(cached {r['cached'] / max(1, r['prompt']):.0%}; prefix ceiling {r['ceiling']:.0%}), "
                  f"completion {r['completion']}; "
                  f"load {r['load']}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["smollm2", "qwen-coder-0.5b"])
    p.add_argument("--cells", nargs="+", default=list(DEFAULT_CELLS), help="env:task_type")
    p.add_argument("--episodes", type=int, default=2)
    p.add_argument("--max-actions", type=int, default=6)
    p.add_argument("--listed", type=lambda s: None if s == "all" else int(s), default=10,
                   help="admissible actions listed per prompt ('all': every one)")
    p.add_argument("--simplification", default="easy", help="ScienceWorld simplifications ('' for none)")
    p.add_argument("--in-flight", type=int, default=2)
    p.add_argument("--condition", default="raw",
                   help="history condition (Raw for the choice; others to measure prefix-cache reuse)")
    p.add_argument("--seed", type=int, default=None, help="task selection seed (default: history.seed)")
    p.add_argument("--tasks-dir", type=Path, default=REPO / "results" / "tasks")
    p.add_argument("--alfworld-root", type=Path, default=REPO / "resources" / "alfworld" / "games")
    args = p.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
