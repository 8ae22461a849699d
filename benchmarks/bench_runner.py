"""Runner and environment overhead: achieved episodes/s against the ideal for the concurrency.

Real ScienceWorld and ALFWorld episodes through :class:`hindsight.agent.runner.Runner`
against the loopback endpoint answering every request after a fixed latency (200 ms by
default).  With ``C`` episodes in flight, each of ``M`` actions (one model call per step),
the ideal is ``C / (M x latency)`` episodes/s: everything else (prompt rendering, the
model client, the cache and records, environment steps in worker threads, the pool) is
overhead.  The pool is built and every environment warmed up (``--warm`` steps) before
the clock starts: construction and a JVM's first compilation are one-offs per cell.

Two ratios per environment: against the model-bound ideal, and against the ideal with the
engines' own time per step added (measured inside each engine call).  The second is the
runner's overhead; the first is bounded by ``latency / (latency + engine time)`` whatever
the runner does: on a 2-core machine ScienceWorld's valid-action enumeration costs about
100-200 ms a step and an ALFWorld game load about a second an episode.  The last line is
the smallest runner ratio over the environments (target >= 0.90).  Each line also gives
the machine's load average and this process's CPU seconds (with its children's) over the
timed part; the engines' speed switches (``HINDSIGHT_TEXTWORLD_MEMO``, ``..._SHALLOW_COPY``,
``..._LAZY_REPLAN``, ``HINDSIGHT_SCIENCEWORLD_JOIN``, all on by default) are read from the
environment, so ``VAR=0`` gives the "before" figures.

    python benchmarks/bench_runner.py [--envs scienceworld alfworld] [--episodes 16]
        [--steps 10] [--inflight 4] [--process] [--latency 0.2] [--alfworld-root resources/alfworld/games]

ALFWorld needs games: the pipeline's (``resources/alfworld/games``, built by
``snakemake resources/alfworld/games.parquet``) or, if absent, a small set generated into
a temporary folder first (a minute or two).
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


class TimedEnv:
    """An environment whose interface calls add their own duration (not a lock wait) to ``spent``."""

    def __init__(self, env, spent: list[float]) -> None:
        self._env, self._spent = env, spent
        self.thread_safe = getattr(env, "thread_safe", False)

    def __getattr__(self, name):
        attr = getattr(self._env, name)
        if not callable(attr) or name == "close":
            return attr

        def timed(*args, **kw):
            t0 = time.perf_counter()
            try:
                return attr(*args, **kw)
            finally:
                self._spent[0] += time.perf_counter() - t0

        return timed

    def close(self) -> None:
        self._env.close()


def alfworld_tasks(root: Path | None, n: int) -> tuple[dict, list[str]]:
    from hindsight.envs.alfworld import task_rows

    if root is None or not root.exists():
        from hindsight.envs.alfworld_gen import generate

        root = Path(tempfile.mkdtemp(prefix="bench-alfworld-")) / "games"
        print(f"alfworld: generating a small game set in {root} ...", flush=True)
        generate(root, seed=0, sizes={"train": 6, "practice": 0, "eval": 6}, workers=2)
    ids = sorted(r["task_id"] for r in task_rows(root))
    return {"root": str(root)}, [ids[i % len(ids)] for i in range(n)]


def scienceworld_tasks(n: int) -> tuple[dict, list[str]]:
    names = ["find-non-living-thing", "lifespan-longest-lived", "identify-life-stages-1", "boil",
             "chemistry-mix", "measure-melting-point-known-substance", "grow-plant", "power-component"]
    return {}, [f"{names[i % len(names)]}:{i // len(names)}" for i in range(n)]


async def warm_up(pool, task_id: str, steps: int) -> None:
    """A few steps on every pooled environment before the clock starts (ScienceWorld's JVM
    compiles its hot paths during the first episodes; a cell pays that once)."""
    async def one(env):
        call = pool.caller(env)
        await call(env.reset, task_id)
        for _ in range(steps):
            acts = await call(env.admissible_actions)
            if acts:
                await call(env.step, sorted(acts)[0])

    envs = [await pool.acquire() for _ in range(pool.size)]
    await asyncio.gather(*(one(e) for e in envs))
    for e in envs:
        pool.release(e)


async def bench(env: str, options: dict, tasks: list[str], steps: int, inflight: int, latency: float,
                workdir: Path, warm: int = 20) -> float:
    from hindsight.agent.prompts import HistoryPrompts
    from hindsight.agent.runner import EpisodeSpec, Runner
    from hindsight.envs.pool import EnvPool, env_factory
    from hindsight.llm import open_client
    from hindsight.studies.history.design import actor_settings
    from hindsight.testing import Faults, LoopbackServer, loopback_endpoint

    import yaml

    srv = LoopbackServer(policy="first_admissible", faults=Faults(latency_s=latency)).start()
    try:
        models = workdir / f"models-{env}.yaml"
        models.write_text(yaml.safe_dump({"endpoints": {"loop": loopback_endpoint(srv, max_concurrency=inflight)}}))
        with open(REPO / "config" / "config.yaml") as fh:
            cfg = yaml.safe_load(fh)
        cfg.update(models_file=str(models), panel=["loop"], roles={},
                   cache={"path": str(workdir / f"{env}.sqlite"), "mode": "off", "backend": "sqlite"})
        # a step budget the episodes always use up: the actor takes the first admissible
        # action and the environments' step caps are lifted
        s = actor_settings("loop", "raw", {"mode": "choice", "max_actions": steps, "max_output_tokens": 32,
                                           "max_listed_actions": 10})
        specs = [EpisodeSpec(env, t, f"bench/{env}/{i}", i, s) for i, t in enumerate(tasks)]
        prompts = HistoryPrompts.load(REPO / "config" / "prompts" / "history")
        spent = [0.0]
        make = env_factory(env, options)
        async with EnvPool(lambda: TimedEnv(make(), spent), inflight) as pool, \
                open_client(cfg, f"bench/{env}", workdir / f"{env}.calls.parquet") as client:
            await pool.fill()
            await warm_up(pool, tasks[0], warm)
            runner = Runner(client, pool, prompts, in_flight=inflight)
            spent[0] = 0.0
            c0, load0 = os.times(), os.getloadavg()[0]
            t0 = os.times().elapsed
            episodes = await runner.concurrent(specs)
            dt = os.times().elapsed - t0
            c1 = os.times()
            cpu_s = sum(c1[:4]) - sum(c0[:4])
            env_s = spent[0]
            locked = not getattr(pool._all[0], "thread_safe", False)
        n_steps = sum(len(e.steps) for e in episodes)
        # ideal: every episode's steps back to back at the endpoint's latency, C at a time
        ideal_s = sum(len(e.steps) for e in episodes) * latency / inflight
        ratio = ideal_s / dt
        # the same ideal with the environments' own time added (their calls, measured inside
        # the engines; serialized under the pool's lock for engines that are not thread-safe)
        with_env_s = max((n_steps * latency + env_s) / inflight, env_s if locked else 0.0)
        print(f"{env}: {len(episodes)} episodes, {n_steps} steps in {dt:.2f} s; "
              f"{len(episodes) / dt:.3f} episodes/s vs ideal {len(episodes) / ideal_s:.3f}: "
              f"ratio {ratio:.3f} (in flight {inflight}, latency {latency * 1000:.0f} ms); "
              f"engine time {env_s / n_steps * 1000:.0f} ms per step{' (serialized)' if locked else ''}; "
              f"ratio to the ideal with engine time {with_env_s / dt:.3f} "
              f"(runner overhead {(dt - with_env_s) / n_steps * inflight * 1000:.1f} ms per step); "
              f"{cpu_s:.1f} CPU-s in this process (+ reaped children), load {load0:.1f} -> {os.getloadavg()[0]:.1f}",
              flush=True)
        return ratio, with_env_s / dt
    finally:
        srv.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", nargs="+", default=["scienceworld", "alfworld"])
    ap.add_argument("--episodes", type=int, default=16)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--inflight", type=int, default=4)
    ap.add_argument("--process", action="store_true",
                    help="run every environment in its own process (ProcessEnv), not in worker threads")
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--warm", type=int, default=20, help="warm-up steps per pooled environment (not timed)")
    ap.add_argument("--alfworld-root", type=Path, default=REPO / "resources" / "alfworld" / "games")
    args = ap.parse_args()
    import logging

    logging.basicConfig(level=logging.WARNING)
    ratios = {}
    with tempfile.TemporaryDirectory(prefix="bench-runner-") as tmp:
        for env in args.envs:
            if env == "alfworld":
                options, tasks = alfworld_tasks(args.alfworld_root, args.episodes)
            elif env == "scienceworld":
                options, tasks = scienceworld_tasks(args.episodes)
            else:
                raise SystemExit(f"bench_runner: unsupported environment {env!r} (scienceworld, alfworld)")
            if args.process:
                options = {**options, "process": True}
            ratios[env] = asyncio.run(bench(env, options, tasks, args.steps, args.inflight, args.latency, Path(tmp),
                                        args.warm))
    worst = min(ratios, key=lambda e: ratios[e][1])
    print("ratio to the model-bound ideal: " + ", ".join(f"{e} {r[0]:.3f}" for e, r in ratios.items()))
    print(f"runner ratio (ideal with engine time, min over {', '.join(ratios)}): {ratios[worst][1]:.3f} "
          f"({worst}; target >= 0.90)")


if __name__ == "__main__":
    main()
