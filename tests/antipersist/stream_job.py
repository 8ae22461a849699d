"""A training job for the tests: ``python stream_job.py CONFIG.json OUT_DIR DESIGN [eval | eval-rounds]``.

Plays :func:`memtrials.studies.antipersist.train.train_stream` on the ScienceWorld test
table (``OUT_DIR/tasks.parquet``) and writes its outputs into OUT_DIR; with ``eval``, also
the frozen evaluation of the final memory (``eval-rounds``: of every round's snapshot).
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))


async def main(cfg: dict, out: Path, design: str, with_eval: bool, every_round: bool = False) -> None:
    from memtrials.studies.antipersist.evaluate import evaluate
    from memtrials.studies.antipersist.train import train_stream
    from tests.antipersist.helpers import cell

    c = cell(design, **cfg.pop("_cell", {}))
    common = dict(model="loop", env="scienceworld", design=design, seed_index=1, cell=c,
                  prompts_dir=str(REPO / "config/prompts/memory"),
                  actor_prompts_dir=str(REPO / "config/prompts/actor"), tasks_path=str(out / "tasks.parquet"))
    await train_stream(cfg, **common, out_episodes=str(out / "train.parquet"), out_steps=str(out / "train.steps.parquet"),
                       out_calls=str(out / "train.calls.parquet"), out_memory=str(out / "memory.json"),
                       out_rounds=str(out / "rounds.json"))
    if with_eval:
        await evaluate(cfg, **common, memory_path=str(out / "memory.json"), out_episodes=str(out / "eval.parquet"),
                       out_steps=str(out / "eval.steps.parquet"), out_calls=str(out / "eval.calls.parquet"),
                       out_record=str(out / "eval.json"), rounds_path=str(out / "rounds.json"),
                       every_round=every_round)


if __name__ == "__main__":
    asyncio.run(main(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2]), sys.argv[3],
                     len(sys.argv) > 4 and sys.argv[4] in ("eval", "eval-rounds"),
                     len(sys.argv) > 4 and sys.argv[4] == "eval-rounds"))
