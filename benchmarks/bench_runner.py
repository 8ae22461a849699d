"""Runner and environment overhead: achieved episodes/s against the ideal for the concurrency.

Real ScienceWorld and ALFWorld episodes through :class:`memtrials.agent.runner.Runner`
against the loopback endpoint answering every request after a fixed latency (200 ms by
default).  The endpoint serves ``C`` requests at once (``--inflight``: its
``max_concurrency``; the client's endpoint semaphore queues the rest); with ``M`` actions
an episode (one model call per step) the ideal is ``C / (M x latency)`` episodes/s, the
model-bound ideal: everything else (prompt rendering, the model client, the cache and
records, environment steps in worker threads or children, the pool) is overhead.

Two settings per environment, on the same warm pool and client:

* **E = C**: as many episodes in flight as endpoint slots (the studies' default: e.g.
  ``history.in_flight`` 2 against the embedded endpoints' ``max_concurrency`` 2).  Each episode's environment step runs while its endpoint slot
  idles, so a step costs latency + engine time and the ratio is bounded by
  ``latency / (latency + engine time)`` whatever the runner does.
* **E > C** (``--episodes-in-flight``, default 2C): more episodes than slots, as a
  production runner keeps its endpoint busy: one episode steps its environment while others
  wait on the model.  The ideal stays ``C / (M x latency)``.

Each line gives the ratio to the model-bound ideal and to the ideal with the engines' own
time added (measured inside each engine call: ``max(n x latency / C, (n x latency + engine
time) / E)`` for ``n`` steps), the runner's own overhead per step, the machine's load
average and this process's CPU seconds (with its reaped children's) over the timed part.
The pool is built and every environment warmed up (``--warm`` steps) before the clock
starts: construction and a JVM's first compilation are one-offs per cell.  The last lines
give, per E, the ratio to the model-bound ideal per environment and the minimum over the
environments against the 0.90 target.

The defaults (C = 2, the embedded endpoints' ``max_concurrency`` on a 2-core machine; 48
episodes) are chosen so that a batch's tail, where fewer than E episodes are left and the
slots idle, is a small part of the run: with 16 episodes it cost ScienceWorld about 0.2 of
the ratio (0.75 against 0.93 for the same C and E).  The tail is still counted.

The engines' speed switches are on by default: ``MEMTRIALS_TEXTWORLD_MEMO``,
``..._SHALLOW_COPY``, ``..._LAZY_REPLAN`` (read from the environment, on unless ``0``) and
ScienceWorld's joined action list (``envs.scienceworld.join_admissible`` of
config/config.yaml, ``true``; ``MEMTRIALS_SCIENCEWORLD_JOIN`` set in the environment
overrides it), so ``VAR=0`` gives the "before" figures.

    python benchmarks/bench_runner.py [--envs scienceworld alfworld] [--episodes 48]
        [--steps 10] [--inflight 2] [--episodes-in-flight 4] [--process] [--latency 0.2]
        [--alfworld-root resources/alfworld/games]

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
    from memtrials.envs.alfworld.env import task_rows

    if root is None or not root.exists():
        from memtrials.envs.alfworld.gen import generate

        root = Path(tempfile.mkdtemp(prefix="bench-alfworld-")) / "games"
        print(f"alfworld: generating a small game set in {root} ...", flush=True)
        generate(root, seed=0, sizes={"train": 6, "practice": 0, "eval": 6}, workers=2)
    ids = sorted(r["task_id"] for r in task_rows(root))
    return {"root": str(root)}, [ids[i % len(ids)] for i in range(n)]


def scienceworld_tasks(n: int) -> tuple[dict, list[str]]:
    names = ["find-non-living-thing", "lifespan-longest-lived", "identify-life-stages-1", "boil",
             "chemistry-mix", "measure-melting-point-known-substance", "grow-plant", "power-component"]
    return {}, [f"{names[i % len(names)]}:{i // len(names)}" for i in range(n)]


async def warm_up(pool, task_ids: list[str], steps: int) -> None:
    """About ``steps`` steps on every pooled environment before the clock starts, spread over the
    distinct tasks of the run (a reset and a few steps each): ScienceWorld's JVM compiles the
    hot paths of each task's load and enumeration during its first episodes (a first load of a
    task ~330 ms, a later one ~130 ms); a cell pays that once."""
    tasks = list(dict.fromkeys(task_ids))
    per_task = max(2, steps // len(tasks))

    async def one(env):
        call = pool.caller(env)
        for task_id in tasks:
            await call(env.reset, task_id)
            for _ in range(per_task):
                acts = await call(env.admissible_actions)
                if acts:
                    await call(env.step, sorted(acts)[0])

    envs = [await pool.acquire() for _ in range(pool.size)]
    await asyncio.gather(*(one(e) for e in envs))
    for e in envs:
        pool.release(e)


async def bench(env: str, options: dict, tasks: list[str], steps: int, inflight: int, episodes_in_flight: int,
                latency: float, workdir: Path, warm: int = 20) -> dict[int, tuple[float, float]]:
    """Ratios (model-bound, with engine time) per episodes-in-flight setting: ``episodes_in_flight``
    first, then ``inflight`` (E = C), on one warm pool of ``episodes_in_flight`` environments."""
    from memtrials.agent.prompts import ActorPrompts
    from memtrials.agent.runner import EpisodeSpec, Runner
    from memtrials.envs.pool import EnvPool, env_factory
    from memtrials.llm import open_client
    from memtrials.studies.history.design import actor_settings
    from memtrials.testing import Faults, LoopbackServer, loopback_endpoint

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
        prompts = ActorPrompts.load(REPO / "config" / "prompts" / "actor")
        spent = [0.0]
        make = env_factory(env, options)
        out: dict[int, tuple[float, float]] = {}
        pool_size = max(inflight, episodes_in_flight)
        async with EnvPool(lambda: TimedEnv(make(), spent), pool_size) as pool, \
                open_client(cfg, f"bench/{env}", workdir / f"{env}.calls.parquet") as client:
            await pool.fill()
            await warm_up(pool, tasks, warm)
            locked = not getattr(pool._all[0], "thread_safe", False)
            for e in dict.fromkeys([episodes_in_flight, inflight]):
                specs = [EpisodeSpec(env, t, f"bench/{env}/E{e}/{i}", i, s) for i, t in enumerate(tasks)]
                runner = Runner(client, pool, prompts, in_flight=e)
                spent[0] = 0.0
                c0, load0 = os.times(), os.getloadavg()[0]
                t0 = os.times().elapsed
                episodes = await runner.concurrent(specs)
                dt = os.times().elapsed - t0
                c1 = os.times()
                cpu_s = sum(c1[:4]) - sum(c0[:4])
                env_s = spent[0]
                n_steps = sum(len(ep.steps) for ep in episodes)
                # the model-bound ideal: every step one model call at the latency, C at a time
                ideal_s = n_steps * latency / inflight
                ratio = ideal_s / dt
                # the same with the engines' own time: an episode's step costs latency + engine time,
                # E episodes at a time (and engine calls serialized under the pool's lock where
                # the engine is not thread-safe)
                with_env_s = max(ideal_s, (n_steps * latency + env_s) / e, env_s if locked else 0.0)
                label = "E = C" if e == inflight else "E > C, overlapped"
                print(f"{env} [{label}: E {e} episodes in flight, C {inflight} endpoint slots]: "
                      f"{len(episodes)} episodes, {n_steps} steps in {dt:.2f} s; "
                      f"{len(episodes) / dt:.3f} episodes/s vs model-bound ideal {len(episodes) / ideal_s:.3f}: "
                      f"ratio {ratio:.3f} (latency {latency * 1000:.0f} ms); "
                      f"engine time {env_s / n_steps * 1000:.0f} ms per step{' (serialized)' if locked else ''}; "
                      f"ratio to the ideal with engine time {with_env_s / dt:.3f} "
                      f"(runner overhead {(dt - with_env_s) / n_steps * inflight * 1000:.1f} ms per step); "
                      f"{cpu_s:.1f} CPU-s in this process (+ reaped children), "
                      f"load {load0:.1f} -> {os.getloadavg()[0]:.1f}", flush=True)
                out[e] = (ratio, with_env_s / dt)
        return out
    finally:
        srv.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--envs", nargs="+", default=["scienceworld", "alfworld"])
    ap.add_argument("--episodes", type=int, default=48)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--inflight", type=int, default=2, help="C: the endpoint's concurrency (max_concurrency)")
    ap.add_argument("--episodes-in-flight", type=int, default=None,
                    help="E: episodes in flight in the overlapped run (default 2C; E = C is also run)")
    ap.add_argument("--process", action="store_true",
                    help="run every environment in its own process (ProcessEnv), not in worker threads")
    ap.add_argument("--latency", type=float, default=0.2)
    ap.add_argument("--warm", type=int, default=20, help="warm-up steps per pooled environment, over the run's distinct tasks (not timed)")
    ap.add_argument("--alfworld-root", type=Path, default=REPO / "resources" / "alfworld" / "games")
    args = ap.parse_args()
    c = args.inflight
    e = args.episodes_in_flight if args.episodes_in_flight is not None else 2 * c
    if c < 1 or e < 1:
        raise SystemExit("bench_runner: --inflight and --episodes-in-flight must be >= 1")
    import logging

    import yaml

    from memtrials.envs.scienceworld import env as scienceworld

    logging.basicConfig(level=logging.WARNING)
    if scienceworld.JOIN_SWITCH not in os.environ:  # the config's default, as a pipeline job gets it
        with open(REPO / "config" / "config.yaml") as fh:
            scienceworld.configure(yaml.safe_load(fh))
    print(f"bench_runner: C {c} endpoint slots, E {e} episodes in flight (overlapped) and E = C; "
          f"{args.episodes} episodes x {args.steps} steps; latency {args.latency * 1000:.0f} ms; "
          f"{'process-backed' if args.process else 'default'} environments; "
          f"ScienceWorld join {'on' if scienceworld.join_enabled() else 'off'}; "
          f"load {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs", flush=True)
    ratios: dict[str, dict[int, tuple[float, float]]] = {}
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
            ratios[env] = asyncio.run(bench(env, options, tasks, args.steps, c, e, args.latency, Path(tmp),
                                            args.warm))
    print(f"load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for k in dict.fromkeys([c, e]):
        label = "E = C" if k == c else "overlapped"
        per_env = {env: r[k] for env, r in ratios.items()}
        worst = min(per_env, key=lambda x: per_env[x][0])
        print(f"ratio to the model-bound ideal C/(M x latency), E {k} episodes in flight, C {c} ({label}): "
              + ", ".join(f"{env} {r[0]:.3f}" for env, r in per_env.items())
              + f"; min {per_env[worst][0]:.3f} ({worst}; target >= 0.90: "
              + ("met" if per_env[worst][0] >= 0.90 else "NOT met") + ")"
              + "; ideal with engine time: " + ", ".join(f"{env} {r[1]:.3f}" for env, r in per_env.items()))


if __name__ == "__main__":
    main()
