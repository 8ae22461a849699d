"""Which task types, budgets and embedded model make the default history run show something.

A sibling of ``bench_default_choice.py`` (whose cell runner it reuses): real Raw episodes
through the history study's own cell (:func:`memtrials.studies.history.rollouts.rollout_cell`,
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
pair (:func:`memtrials.studies.history.probe.select_pairs`) and, with ``--gold-check``
(no model), the share of the gold path's steps whose gold action is among the listed
actions that step shows (the actor's own listing function, :func:`memtrials.agent.actor.
listed_actions`, per ``--listing``, at the same episode seeds, on the task text and the
observation the actor would see there): a listing that truncates the gold action away
leaves a grammar-constrained actor no way to take it.  ``uptime`` is printed first and last.

Screening many tasks.  ``--offset k`` skips the first ``k`` tasks of the seeded order (so
``--offset 3 --episodes 10`` screens the 4th to 13th task of the type), ``--task-ids``
names the tasks of a cell explicitly (each id goes to the cell of its type), and
``--per-task`` prints one line per task and budget: won, the first winning step, the
score at the budget and the steps played; the summary table then lists the tasks won.

Sampling.  ``--temperature T [T ...]`` (and ``--top-p P``) replaces the temperature (top_p)
of the compared chat endpoints' ``params`` for this screen only, in this process
(:func:`sampling`; ``config/models.yaml`` and the defaults are untouched): each temperature
is one pass over the cells, in the order given.  The seed stays what the model layer sets per
request (the endpoint's seed plus the actor's sample index), and the cache key holds the
changed params, so each temperature's calls are fresh.  Without ``--temperature`` the
endpoint's own params play (``smollm2``: temperature 0.0, greedy).  Rows print the temperature
(``-``: the endpoint's own).

    python benchmarks/bench_default_tasks.py --models smollm2 --episodes 4 --budgets 6 10 15 \
        --listed 10 20 --listing sample ranked --cells scienceworld:lifespan-shortest-lived alfworld:pick_and_place_simple \
        [--simplification easy] [--gold-check] [--tasks-dir results/tasks] [--alfworld-root ...]
        [--offset 3] [--task-ids lifespan-longest-lived:110 ...] [--per-task] [--temperature 1.0 0.7] [--top-p 0.95]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
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


@contextlib.contextmanager
def sampling(models, temperature: float | None, top_p: float | None):
    """While open, every client this process opens (:func:`memtrials.llm.open_client`) sees the
    chat endpoints ``models`` with ``temperature`` / ``top_p`` (None: unchanged) in their params:
    an in-process variant of the registry entry, so the request and its cache key carry them."""
    from memtrials.llm import session

    over = {k: v for k, v in (("temperature", temperature), ("top_p", top_p)) if v is not None}
    original = session.check_config

    def varied(config, *a, **kw):
        endpoints = original(config, *a, **kw)
        return {name: (dataclasses.replace(ep, params={**ep.params, **over})
                       if over and name in models and ep.task == "chat" else ep)
                for name, ep in endpoints.items()}

    session.check_config = varied
    try:
        yield
    finally:
        session.check_config = original


def of_type(env: str, typ: str, task: str) -> bool:
    """Whether ``--task-ids`` entry ``task`` belongs to cell ``env:typ`` (ScienceWorld
    ``type:variation``, ALFWorld ``split/type-...-scene/trial``; other envs: every id)."""
    if env == "scienceworld":
        return task.partition(":")[0] == typ
    if env == "alfworld":
        return task.rpartition("/")[0].rpartition("/")[2].startswith(f"{typ}-") or task.startswith(f"{typ}-")
    return True


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
    from memtrials.agent.actor import listed_actions
    from memtrials.envs.make import make_env

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

    from memtrials.studies.history.probe import select_pairs

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


async def screen(args, model: str, temp: float | None, first: bool, cfg_args, work: Path, h: dict, seed: int,
                 rows: list[dict], gold: list[str]) -> None:
    """One pass over the cells for ``model`` at temperature ``temp`` (None: the endpoint's own);
    the gold-listing check runs on the first model's first pass only."""
    from memtrials.seeds import seed_of

    out = work / f"temperature-{'endpoint' if temp is None else temp}"
    out.mkdir(exist_ok=True)
    for cell in args.cells:
        env, _, typ = cell.partition(":")
        if args.task_ids:
            tasks = [t for t in args.task_ids if of_type(env, typ, t)]
        else:
            tasks = base.pick_tasks(args.tasks_dir, env, typ, h["splits"][env],
                                    args.offset + args.episodes, seed)[args.offset:]
        if not tasks:
            continue
        seeds = [seed_of(seed, env, t) for t in tasks]
        for listed, listing in [(c, m) for c in args.listed for m in args.listing]:
            if args.gold_check and model == args.models[0] and first:
                hit, total, first_hits = gold_listed_share(env, tasks, seeds, listed, args, listing)
                gold.append(f"{env} {typ} listed {listed} {listing}: gold action listed at {hit}/{total} "
                            f"gold steps, at step 1 in {first_hits}/{len(tasks)} tasks")
                print(gold[-1], flush=True)
            if args.gold_only:
                continue
            run = argparse.Namespace(max_actions=max(args.budgets), listed=listed, condition="raw",
                                     simplification=args.simplification, alfworld_root=args.alfworld_root,
                                     in_flight=args.in_flight, listing=listing)
            r = await base.run_cell(base.bench_config(cfg_args, work), model, env, typ, tasks, run, out)
            stem = out / f"{model}-{env}-{typ}"
            new = budget_rows(model, env, typ, listed, stem, r["wall_s"], sorted(args.budgets), listing)
            for row in new:
                row["load"] = r["load"]
                row["temperature"] = "-" if temp is None else f"{temp:g}"
                print(fmt(row), flush=True)
                if args.per_task:
                    for t in row["tasks"]:
                        print(f"    {t['task']:48s} budget {row['budget']:2d}: "
                              f"{'WON at step ' + str(t['first_win']) if t['won'] else 'not won'}, "
                              f"score {t['score']:.0f}, {t['steps']} steps", flush=True)
            rows += new


async def main_async(args) -> None:
    print(f"uptime at start: {uptime()}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench-default-tasks-"))
    cfg_args = argparse.Namespace(models=args.models)
    config = base.bench_config(cfg_args, work)
    h = config["history"]
    seed = args.seed if args.seed is not None else int(h["seed"])
    rows: list[dict] = []
    gold: list[str] = []
    temps = args.temperature or [None]
    try:
        for model in args.models:
            if not args.gold_only:
                t0 = time.monotonic()
                await base.warm(config, model)
                print(f"{model}: server warm in {time.monotonic() - t0:.0f} s", flush=True)
            for temp in temps:
                with sampling([model], temp, args.top_p):
                    await screen(args, model, temp, temp == temps[0], cfg_args, work, h, seed, rows, gold)
    finally:
        from memtrials.llm.local.shared import server_dir, stop_all

        stop_all(server_dir(config))
    print(f"\nsettings: seed {seed}, {args.episodes} episodes per cell from offset {args.offset}"
          f"{' (tasks named)' if args.task_ids else ''}, ScienceWorld simplification "
          f"{args.simplification!r}, work folder {work}")
    shown = " ".join("-" if t is None else f"{t:g}" for t in temps)
    top_p = "the endpoint's own" if args.top_p is None else args.top_p
    print(f"sampling: temperature {shown} ('-': the endpoint's own), top_p {top_p}; seed per request as the model layer sets it")
    print("| model | env | type | listed | listing | temperature | budget | episodes | wins | mean score | minutes | "
          "wins/min | pairs |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['model']} | {r['env']} | {r['type']} | {r['listed']} | {r['listing']} | {r['temperature']} | "
              f"{r['budget']} | "
              f"{r['episodes']} | "
              f"{r['won']} | {r['score']:.2f} | {r['minutes']:.1f} | {r['won'] / max(1e-9, r['minutes']):.2f} | "
              f"{r['pairs']} |")
    if args.per_task:
        for r in rows:
            won = [f"{t['task']} (step {t['first_win']})" for t in r["tasks"] if t["won"]]
            print(f"won by {r['model']} {r['env']} {r['type']} listed {r['listed']} {r['listing']} "
                  f"temperature {r['temperature']} budget "
                  f"{r['budget']}: {', '.join(won) or 'none'}")
    for line in gold:
        print(line)
    print(f"uptime at end: {uptime()}")


def fmt(r: dict) -> str:
    return (f"{r['model']:10s} {r['env']:12s} {r['type']:44s} listed {r['listed']} {r['listing']} "
            f"temperature {r['temperature']} budget {r['budget']:2d}: "
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
    p.add_argument("--listing", nargs="+", choices=["sample", "ranked", "best-first"], default=["sample"],
                   help="action listings compared (memtrials.agent.listing)")
    p.add_argument("--simplification", default="easy", help="ScienceWorld simplifications ('' for none)")
    p.add_argument("--in-flight", type=int, default=2)
    p.add_argument("--seed", type=int, default=None, help="task selection seed (default: history.seed)")
    p.add_argument("--offset", type=int, default=0, help="skip the first OFFSET tasks of the seeded order")
    p.add_argument("--task-ids", nargs="+", default=None,
                   help="play these tasks (ScienceWorld and ALFWorld ids go to the cell of their type)")
    p.add_argument("--temperature", nargs="+", type=float, default=None,
                   help="sampling temperatures screened, one pass over the cells each (default: the endpoint's params)")
    p.add_argument("--top-p", type=float, default=None, help="top_p for the screen (default: the endpoint's params)")
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
