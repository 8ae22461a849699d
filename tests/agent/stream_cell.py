"""A stream cell for the runner's tests: ScienceWorld episodes with a lesson log, in batches.

``python stream_cell.py CONFIG.json OUT_DIR BATCH`` plays :data:`SPECS` as a stream with
per-batch checkpoints in ``OUT_DIR/checkpoints`` and writes ``episodes.parquet``,
``steps.parquet``, ``calls.parquet`` and ``memory.json`` (the final snapshot) into OUT_DIR.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROMPTS = str(REPO / "config" / "prompts" / "actor")
MEMORY_PROMPTS = str(REPO / "config" / "prompts" / "memory")
TASKS = ["find-non-living-thing:0", "lifespan-longest-lived:0", "identify-life-stages-1:0"]


def specs(n: int = 6, max_actions: int = 2):
    from memtrials.agent.runner import EpisodeSpec
    from memtrials.studies.history.design import actor_settings

    s = actor_settings("loop", "raw", {"mode": "choice", "max_actions": max_actions, "max_output_tokens": 32,
                                       "max_listed_actions": 5})
    return [EpisodeSpec("scienceworld", TASKS[i % len(TASKS)], f"stream/{i:02d}", i, s) for i in range(n)]


async def run(cfg: dict, out: Path, batch: int, n: int = 6) -> None:
    from memtrials.agent.prompts import ActorPrompts
    from memtrials.agent.runner import Runner, write_episodes
    from memtrials.envs.pool import EnvPool, env_factory
    from memtrials.llm import open_client
    from memtrials.memory.lessons import LessonLog
    from memtrials.memory.snapshot import write_snapshot

    memory = LessonLog("loop", MEMORY_PROMPTS, max_tokens=24)
    sp = specs(n)
    async with EnvPool(env_factory("scienceworld"), 2) as pool, \
            open_client(cfg, "tests/stream", out / "calls.parquet") as client:
        runner = Runner(client, pool, ActorPrompts.load(PROMPTS), in_flight=2)
        eps = await runner.stream(sp, memory, batch_size=batch, checkpoints=out / "checkpoints")
    write_episodes(eps, {"model": "loop", "env": "scienceworld", "condition": "stream"},
                   {t: i for i, t in enumerate(TASKS)},
                   str(out / "episodes.parquet"), str(out / "steps.parquet"))
    write_snapshot(out / "memory.json", memory)


if __name__ == "__main__":
    asyncio.run(run(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]), int(sys.argv[3])))
