"""Which task types, budgets and embedded model make the default history run show something.

A sibling of ``bench_default_choice.py`` (whose cell runner it reuses): real Raw episodes
through the history study's own cell (:func:`hindsight.studies.history.rollouts.rollout_cell`,
``choice`` mode, the default config's actor otherwise) for each (model, env, task type,
listed actions), ``--episodes`` tasks of that type from the history split, drawn by the
history seed, every call fresh (a new cache), one warm embedded server per model.

Budgets.  Every episode runs ``max(--budgets)`` actions (or until won / done).  The actor's
prompt does not name the budget, and a step's listing and seed depend only on the episode
seed, the step number and what the episode saw up to that step (the ranked listing reads the
task and the current observation), so the first ``b`` steps of that episode are the episode a
budget of ``b`` plays; the figures for the smaller budgets are read off those prefixes
(won within ``b`` steps; the probe's repeated pair needs a recorded step after it within
``b``; minutes: the share of the cell's steps that fall within ``b``).

Printed per (model, env, type, listed, budget): episodes, wins, mean final score (the
score at step ``b``), minutes, wins per minute, episodes with a probe-eligible repeated
pair (:func:`hindsight.studies.history.probe.select_pairs`) and, with ``--gold-check``
(no model), the share of the gold path's steps whose gold action is among the listed
actions that step shows (the actor's own listing function, :func:`hindsight.agent.actor.
listed_actions`, per ``--listing``, at the same episode seeds, on the task text and the
observation the actor would see there): a listing that truncates the gold action away
leaves a grammar-constrained actor no way to take it.  ``uptime`` is printed first and last.

Screening many tasks.  ``--offset k`` skips the first ``k`` tasks of the seeded order (so
``--offset 3 --episodes 10`` screens the 4th to 13th task of the type), ``--task-ids``
names the tasks of a cell explicitly (``--cells env:type`` then only labels the rows), and
``--per-task`` prints one line per task and budget: won, the first winning step, the
score at the budget and the steps played; the summary table then lists the tasks won.

    python benchmarks/bench_default_tasks.py --models smollm2 --episodes 4 --budgets 6 10 15 \
        --listed 10 20 --listing sample ranked --cells scienceworld:lifespan-shortest-lived alfworld:pick_and_place_simple \
        [--simplification easy] [--gold-check] [--tasks-dir results/tasks] [--alfworld-root ...]
        [--offset 3] [--task-ids lifespan-longest-lived:110 ...] [--per-task]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

import bench_default_choice as base  # noqa: E402

DEFAULT_CELLS = (
    "scienceworld:lifespan-shortest-lived", "scienceworld:lifespan-longest-lived",
    "scienceworld:lifespan-longest-lived-then-shortest-lived", "scienceworld:find-non-living-thing",
    "alfworld:pick_and_place_simple", "alfworld:look_at_obj_in_light",
)


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def env_options(env: str, args) -> dict:
    if env == "scienceworld":
        return {"simplification": args.simplification} if args.simplification else {}
    if env == "alfworld":
        return {"root": str(args.alfworld_root)}
    return {}


def gold_listed_share(env: str, tasks: list[str], seeds: list[int], cap: int | None, args,
                      listing: str = "sample") -> tuple[int, int, int]:
    """(gold steps whose action is listed, gold steps, first steps listed) over ``tasks``, with the
    actor's own listing function on what the actor would see (the task text, the observation)."""
    from hindsight.agent.actor import listed_actions
    from hindsight.envs.make import make_env

    e = make_env(env, process=False, **env_options(env, args))
    hit = total = first = 0
    try:
        for task, seed in zip(tasks, seeds):
            gold = e.gold_actions(task)
            obs = e.reset(task)
            text = e.task_description()
            for t, action in enumerate(gold, start=1):
                admissible = obs.admissible if obs.admissible is not None else e.admissible_actions()
                shown = listed_actions(admissible, cap, f"{seed}:{t}", listing, text, obs.text) or ()
                ok = action in shown
                hit += ok
                total += 1
                first += ok and t == 1
                obs = e.step(action)
                if obs.done:
                    break
    finally:
        e.close()
    return hit, total, first


def budget_rows(model: str, env: str, typ: str, listed, stem: Path, wall: float, budgets: list[int],
                listing: str = "sample") -> list[dict]:
    import pandas as pd

    from hindsight.studies.history.probe import select_pairs

    episodes = pd.read_parquet(f"{stem}.parquet")
    steps = pd.read_parquet(f"{stem}.steps.parquet")
    rows = []
    for b in budgets:
        st = steps[steps["step"] <= b]
        won = st.groupby("episode_id")["won"].any()
        last = st.sort_values("step").groupby("episode_id")["score"].last()
        pairs = select_pairs(episodes, st)
        share = len(st) / max(1, len(steps))
        rows.append({"model": model, "env": env, "type": typ, "listed": listed, "listing": listing, "budget": b,
                     "episodes": len(episodes), "won": int(won.sum()), "score": float(last.mean()),
                     "minutes": wall * share / 60, "pairs": len(pairs), "steps": len(st),
                     "tasks": per_task(episodes, st)})
    return rows


def per_task(episodes, steps) -> list[dict]:
    """One entry per episode of ``steps`` (already cut at a budget): the task, won, the
    first winning step (None: not won), the last score and the steps played."""
    out = []
    for eid, task in zip(episodes["episode_id"], episodes["task_id"]):
        st = steps[steps["episode_id"] == eid].sort_values("step")
        wins = st.loc[st["won"].astype(bool), "step"]
        out.append({"task": str(task), "won": not wins.empty,
                    "first_win": int(wins.iloc[0]) if not wins.empty else None,
                    "score": float(st["score"].iloc[-1]) if len(st) else float("nan"), "steps": len(st)})
    return out


async def main_async(args) -> None:
    from hindsight.studies.history.design import episode_seed

    print(f"uptime at start: {uptime()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench-default-tasks-"))
    cfg_args = argparse.Namespace(models=args.models)
    config = base.bench_config(cfg_args, work)
    h = config["history"]
    seed = args.seed if args.seed is not None else int(h["seed"])
    rows: list[dict] = []
    gold: list[str] = []
    try:
        for model in args.models:
            if not args.gold_only:
                t0 = time.monotonic()
                await base.warm(config, model)
                print(f"{model}: server warm in {time.monotonic() - t0:.0f} s", flush=True)
            for cell in args.cells:
                env, _, typ = cell.partition(":")
                if args.task_ids:
                    tasks = [t for t in args.task_ids if t.partition(":")[0] == typ or env != "scienceworld"]
                else:
                    tasks = base.pick_tasks(args.tasks_dir, env, typ, h["splits"][env],
                                            args.offset + args.episodes, seed)[args.offset:]
                if not tasks:
                    continue
                seeds = [episode_seed(seed, env, t) for t in tasks]
                for listed, listing in [(c, m) for c in args.listed for m in args.listing]:
                    if args.gold_check and model == args.models[0]:
                        hit, total, first = gold_listed_share(env, tasks, seeds, listed, args, listing)
                        gold.append(f"{env} {typ} listed {listed} {listing}: gold action listed at {hit}/{total} "
                                    f"gold steps, at step 1 in {first}/{len(tasks)} tasks")
                        print(gold[-1], flush=True)
                    if args.gold_only:
                        continue
                    run = argparse.Namespace(max_actions=max(args.budgets), listed=listed, condition="raw",
                                             simplification=args.simplification, alfworld_root=args.alfworld_root,
                                             in_flight=args.in_flight, listing=listing)
                    r = await base.run_cell(base.bench_config(cfg_args, work), model, env, typ, tasks, run, work)
                    stem = work / f"{model}-{env}-{typ}"
                    new = budget_rows(model, env, typ, listed, stem, r["wall_s"], sorted(args.budgets), listing)
                    for row in new:
                        row["load"] = r["load"]
                        print(fmt(row), flush=True)
                        if args.per_task:
                            for t in row["tasks"]:
                                print(f"    {t['task']:48s} budget {row['budget']:2d}: "
                                      f"{'WON at step ' + str(t['first_win']) if t['won'] else 'not won'}, "
                                      f"score {t['score']:.0f}, {t['steps']} steps", flush=True)
                    rows += new
    finally:
        from hindsight.llm.shared import server_dir, stop_all

        stop_all(server_dir(config))
    print(f"\nsettings: seed {seed}, {args.episodes} episodes per cell from offset {args.offset}"
          f"{' (tasks named)' if args.task_ids else ''}, ScienceWorld simplification "
          f"{args.simplification!r}, work folder {work}")
    print("| model | env | type | listed | listing | budget | episodes | wins | mean score | minutes | wins/min | pairs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['env']} | {r['type']} | {r['listed']} | {r['listing']} | {r['budget']} | "
              f"{r['episodes']} | "
              f"{r['won']} | {r['score']:.2f} | {r['minutes']:.1f} | {r['won'] / max(1e-9, r['minutes']):.2f} | "
              f"{r['pairs']} |")
    if args.per_task:
        for r in rows:
            won = [f"{t['task']} (step {t['first_win']})" for t in r["tasks"] if t["won"]]
            print(f"won by {r['model']} {r['env']} {r['type']} listed {r['listed']} {r['listing']} budget "
                  f"{r['budget']}: {', '.join(won) or 'none'}")
    for line in gold:
        print(line)
    print(f"uptime at end: {uptime()}")


def fmt(r: dict) -> str:
    return (f"{r['model']:10s} {r['env']:12s} {r['type']:44s} listed {r['listed']} {r['listing']} "
            f"budget {r['budget']:2d}: "
            f"{r['won']}/{r['episodes']} won, score {r['score']:.2f}, {r['minutes']:.1f} min, "
            f"{r['won'] / max(1e-9, r['minutes']):.2f} wins/min, {r['pairs']} with a repeated pair, "
            f"{r['steps']} steps; load {r['load']}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--models", nargs="+", default=["smollm2"])
    p.add_argument("--cells", nargs="+", default=list(DEFAULT_CELLS), help="env:task_type")
    p.add_argument("--episodes", type=int, default=4)
    p.add_argument("--budgets", nargs="+", type=int, default=[6, 10, 15])
    p.add_argument("--listed", nargs="+", type=lambda s: None if s == "all" else int(s), default=[10, 20])
    p.add_argument("--listing", nargs="+", choices=["sample", "ranked"], default=["sample"],
                   help="action listings compared (hindsight.agent.listing)")
    p.add_argument("--simplification", default="easy", help="ScienceWorld simplifications ('' for none)")
    p.add_argument("--in-flight", type=int, default=2)
    p.add_argument("--seed", type=int, default=None, help="task selection seed (default: history.seed)")
    p.add_argument("--offset", type=int, default=0, help="skip the first OFFSET tasks of the seeded order")
    p.add_argument("--task-ids", nargs="+", default=None,
                   help="play these tasks (ScienceWorld ids go to the cell of their type)")
    p.add_argument("--per-task", action="store_true", help="print won / first winning step per task")
    p.add_argument("--gold-check", action="store_true", help="also check the gold action against each listing")
    p.add_argument("--gold-only", action="store_true", help="only the gold-listing check (no model)")
    p.add_argument("--tasks-dir", type=Path, default=REPO / "results" / "tasks")
    p.add_argument("--alfworld-root", type=Path, default=REPO / "resources" / "alfworld" / "games")
    args = p.parse_args()
    args.gold_check = args.gold_check or args.gold_only
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
