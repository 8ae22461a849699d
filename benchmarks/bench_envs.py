"""Steps per second of each environment through ``memtrials.envs`` versus the raw engine call.

Raw engine calls (what an adapter cannot avoid):
* ScienceWorld: ``server.step`` + ``getScore`` + ``getCompleted`` (the fast server path; the
  package's own ``env.step`` is also timed for reference, it builds the valid-action list
  every step);
* ALFWorld: the TextWorld engine's ``step`` (``PddlEnv`` + ALFWorld's wrappers);
* AppWorld: ``world.execute``;
* WebShop: the engine's ``step`` (:class:`memtrials.envs.webshop.engine.WebShopEngine`, the
  project's own re-implementation); also the median wall time of one step, and of one step
  that runs a search for a query not seen before (target: 5 ms).
Rounds of the same action sequence from a fresh reset, raw and interface in alternating
order, on one engine per environment.  The last
line is the smallest interface/raw ratio over the environments (target >= 0.9).

ALFWorld also prints the CPU cost of its engine with and without MemTrials's memo of
TextWorld's parsing (:mod:`memtrials.envs.alfworld.speed`), each in a fresh process (the
kill switch ``MEMTRIALS_TEXTWORLD_MEMO=0`` for "without"): the first game load + reset, a
second game's, a reset of a loaded game, and CPU ms per step, with the before/after ratios.

    python benchmarks/bench_envs.py [--steps 200] [--envs scienceworld alfworld appworld webshop]
        [--alfworld-root resources/alfworld/games] [--appworld-root resources/appworld]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def clock() -> float:
    return os.times().elapsed  # AppWorld freezes time.* while a world is open


def rate(fn: Callable[[str], object], actions: Sequence[str]) -> float:
    t0 = clock()
    for a in actions:
        fn(a)
    dt = clock() - t0
    return len(actions) / dt if dt > 0 else float("inf")


def compare(name: str, raw: Callable[[str], object], iface: Callable[[str], object], actions: Sequence[str],
            reset: Callable[[], object], rounds: int = 3) -> float:
    """Best-of-rounds rates; every block starts from a fresh reset, and the order alternates
    (AppWorld's logs grow with each call, so a later block would otherwise be slower)."""
    raw_rates, if_rates = [], []
    for k in range(rounds):
        for which in ((raw, raw_rates), (iface, if_rates))[:: 1 if k % 2 == 0 else -1]:
            reset()
            which[1].append(rate(which[0], actions))
    r, i = max(raw_rates), max(if_rates)
    print(f"{name}: raw {r:.1f} steps/s, interface {i:.1f} steps/s, ratio {i / r:.3f} ({len(actions)} steps x {rounds})")
    return i / r


def bench_scienceworld(steps: int) -> float:
    from memtrials.envs.scienceworld.env import ScienceWorldEnv

    env = ScienceWorldEnv()
    env.reset("boil:0")
    cycle = ["look around", "inventory", "look at picture", "open door to kitchen", "close door to kitchen"]
    actions = [cycle[i % len(cycle)] for i in range(steps)]
    srv = env.server

    def raw(a: str) -> None:
        srv.step(a)
        srv.getScore()
        srv.getCompleted()

    ratio = compare("scienceworld", raw, env.step, actions, lambda: env.reset("boil:0"))
    pkg = rate(lambda a: env.engine.step(a), actions[: max(10, steps // 20)])
    print(f"scienceworld: package env.step (valid actions every step) {pkg:.1f} steps/s, for reference")
    env.close()
    return ratio


def bench_alfworld(steps: int, root: str | None) -> float:
    from memtrials.envs.alfworld.env import AlfworldEnv, game_dirs

    tmp = None
    if root is None or not game_dirs(root):
        from memtrials.envs.alfworld.gen import generate

        tmp = tempfile.TemporaryDirectory()
        root = str(Path(tmp.name) / "games")
        generate(root, seed=0, sizes={"eval": 2})
    task_id = str(game_dirs(root)[0].relative_to(root))
    env = AlfworldEnv(root=root)
    obs = env.reset(task_id)
    gotos = [a for a in obs.admissible if a.startswith("go to")][:3]
    cycle = ["look", "inventory", *gotos]
    actions = [cycle[i % len(cycle)] for i in range(steps)]
    ratio = compare("alfworld", env.engine.step, env.step, actions, lambda: env.reset(task_id))
    env.close()
    memo_report(root, steps)
    return ratio


def memo_probe(root: str, steps: int) -> dict:
    """CPU seconds of ALFWorld engine work in this process (a fresh one: caches start empty)."""
    import time

    from memtrials.envs.alfworld import speed as textworld_speed
    from memtrials.envs.alfworld.env import AlfworldEnv, game_dirs

    tasks = [str(d.relative_to(root)) for d in game_dirs(root)[:2]]
    env = AlfworldEnv(root=root)
    out: dict = {"memo": textworld_speed.installed()}
    for key, task in zip(("first_load", "second_load"), tasks * 2):
        t0 = time.process_time()
        obs = env.reset(task)
        out[key] = time.process_time() - t0
    t0 = time.process_time()
    obs = env.reset(tasks[-1])
    out["reset"] = time.process_time() - t0
    cycle = ["look", "inventory", *[a for a in obs.admissible if a.startswith("go to")][:3]]
    t0 = time.process_time()
    for i in range(steps):
        env.step(cycle[i % len(cycle)])
    out["step_ms"] = (time.process_time() - t0) / steps * 1000
    env.close()
    return out


def memo_report(root: str, steps: int) -> None:
    """Print the memo's before/after CPU figures (each side measured in its own fresh process)."""
    import json
    import subprocess

    res = {}
    for flag in ("0", "1"):
        env = dict(os.environ, MEMTRIALS_TEXTWORLD_MEMO=flag)
        proc = subprocess.run([sys.executable, __file__, "--memo-probe", str(root), "--steps", str(steps)],
                              capture_output=True, text=True, env=env, check=True)
        res[flag] = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not res["0"]["memo"] and res["1"]["memo"], res
    load = os.getloadavg()[0]
    for key, unit in (("first_load", "s"), ("second_load", "s"), ("reset", "s"), ("step_ms", "ms")):
        before, after = res["0"][key], res["1"][key]
        print(f"alfworld memo: {key} CPU {before:.3f} -> {after:.3f} {unit}, before/after {before / max(after, 1e-9):.2f}x"
              f" (load {load:.1f})")


def bench_appworld(steps: int, root: str | None) -> float:
    from memtrials.envs.appworld.env import AppWorldEnv

    tmp = None
    if root is None or not (Path(root) / "data" / "tasks").is_dir():
        from memtrials.envs.appworld.data import build

        tmp = tempfile.TemporaryDirectory()
        root = str(Path(tmp.name) / "appworld")
        build(root)
    env = AppWorldEnv(root=root)
    env.reset("hsnotetagcount_1")
    cycle = ["print(apis.supervisor.show_profile())", "x = 1 + 1\nprint(x)",
             "print(apis.api_docs.show_api_descriptions(app_name='simple_note'))"]
    actions = [cycle[i % len(cycle)] for i in range(steps)]
    ratio = compare("appworld", lambda a: env.world.execute(a), env.step, actions,
                    lambda: env.reset("hsnotetagcount_1"))
    env.close()
    return ratio


def bench_webshop(steps: int) -> float:
    import statistics
    import time

    from memtrials.envs.webshop.env import WebShopEnv

    env = WebShopEnv()
    goals = env.catalog.goals
    cycle = ["search[{}]", "click[{}]", "click[description]", "click[< prev]", "click[next >]", "click[< prev]",
             "click[back to search]"]
    step_ms, search_ms = [], []
    env.reset("0")
    for i in range(max(steps, len(cycle))):
        k, goal = i % len(cycle), goals[(i // len(cycle)) % len(goals)]
        if k == 0:
            action = cycle[0].format(goal.instruction_text)  # a query not searched before in this process
        elif k == 1:
            links = [c for c in env.engine.available_actions()["clickables"] if c[:1] == "b" and len(c) == 10]
            action = cycle[1].format(links[0] if links else "back to search")
        else:
            action = cycle[k]
        t0 = time.perf_counter()
        env.step(action)
        (search_ms if k == 0 else step_ms).append((time.perf_counter() - t0) * 1000)
    every = step_ms + search_ms
    print(f"webshop: step median {statistics.median(every):.2f} ms over {len(every)} steps; a step with a fresh "
          f"search median {statistics.median(search_ms):.2f} ms (p90 {sorted(search_ms)[int(0.9 * len(search_ms))]:.2f}, "
          f"{len(search_ms)} searches); other steps {statistics.median(step_ms):.3f} ms (target: 5 ms)")
    actions = ["search[decorative pillows]", "click[b0743jkhbv]", 'click[28" x 28"]', "click[features]", "click[< prev]",
               "click[< prev]", "click[next >]", "click[back to search]"]
    actions = [actions[i % len(actions)] for i in range(20 * steps)]  # ~30 us a step: enough for the 10 ms clock
    return compare("webshop", env.engine.step, env.step, actions, lambda: env.reset("0"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--envs", nargs="+", default=["scienceworld", "alfworld", "appworld", "webshop"])
    ap.add_argument("--alfworld-root", default="resources/alfworld/games")
    ap.add_argument("--appworld-root", default="resources/appworld")
    ap.add_argument("--memo-probe", metavar="ROOT", help=argparse.SUPPRESS)  # internal: one side of memo_report
    args = ap.parse_args()
    if args.memo_probe:
        import json

        print(json.dumps(memo_probe(args.memo_probe, args.steps)))
        return
    ratios = {}
    for name in args.envs:
        if name == "scienceworld":
            ratios[name] = bench_scienceworld(args.steps)
        elif name == "alfworld":
            ratios[name] = bench_alfworld(max(20, args.steps // 4), args.alfworld_root)
        elif name == "appworld":
            ratios[name] = bench_appworld(max(20, args.steps // 4), args.appworld_root)
        elif name == "webshop":
            ratios[name] = bench_webshop(args.steps)
        else:
            raise SystemExit(f"bench_envs: unknown environment {name!r}")
    worst = min(ratios, key=ratios.get)
    print(f"min interface/raw ratio over {', '.join(ratios)} (worst: {worst}): {ratios[worst]:.3f}")


if __name__ == "__main__":
    main()
