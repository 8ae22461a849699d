"""The golden history cells: default history config, real ScienceWorld, one fixed endpoint.

Shared by ``make_golden.py`` (which made ``data/`` against the loopback endpoint) and
``tests/history/test_history_unchanged.py`` (which replays them from a copy of that cache).
"""

from __future__ import annotations

import asyncio
import copy
import os
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[3]
GOLDEN_PORT = 38517          # the endpoint's identity (part of every cache key)
TASKS = [("find-non-living-thing:0", "find-non-living-thing"), ("lifespan-longest-lived:0", "lifespan-longest-lived"),
         ("identify-life-stages-1:0", "identify-life-stages-1")]
ROLLOUTS = ["raw", "shuffle_old", "experience", "raw-chat"]
CONTINUATIONS = ["reference", "causal_reference", "experience", "calibrator", "reference-chat"]


def golden_config(tmp: Path, cache_path: Path, max_retries: int = 0) -> dict[str, Any]:
    with open(REPO / "config" / "config.yaml") as fh:
        cfg = yaml.safe_load(fh)
    models = tmp / "models-golden.yaml"
    models.write_text(yaml.safe_dump({"endpoints": {"loop": {
        "provider": "openai", "base_url": f"http://127.0.0.1:{GOLDEN_PORT}/v1", "model": "loopback-model",
        "max_concurrency": 4, "params": {"temperature": 0.0, "top_p": 1.0, "max_tokens": 64, "seed": 0},
        "structured_output": True, "price": {"input_per_mtok": 0.0, "output_per_mtok": 0.0}}}}))
    cfg["models_file"] = str(models)
    cfg["panel"] = ["loop"]
    cfg["roles"] = {"judge": "loop", "calibrator": "loop"}
    cfg["cache"] = {"path": str(cache_path), "mode": "use", "backend": "sqlite"}
    cfg["request"] = {"timeout_s": 5.0, "max_retries": max_retries, "backoff_base_s": 0.01, "backoff_max_s": 0.05}
    cfg["history"] = copy.deepcopy(cfg["history"])
    cfg["history"].update({"tasks_per_cell": 3, "in_flight": 2, "envs": ["scienceworld"],
                           # the default's task seed and options when the golden data was made
                           "seed": 20261130, "env_options": {},
                           "task_types": {"alfworld": None, "scienceworld": None, "appworld": None},
                           "tasks": {"alfworld": None, "scienceworld": None, "appworld": None}})
    # the actor's listing when the golden data was made: a seeded sample of 10 admissible actions
    cfg["history"]["actor"] = dict(cfg["history"]["actor"], max_listed_actions=10, listing="sample")
    cfg["history"]["continuation"]["sources_per_cell"] = 2
    # ScienceWorld's valid-action list as the default fetches it (joined): since the JVM runs with a
    # constant identity hash (memtrials.envs.scienceworld.engine.JVM_OPTIONS), the join changes no output
    return cfg


def task_table(path: Path) -> Path:
    import pandas as pd

    from memtrials.envs.tasks import make_table

    rows = [{"task_id": t, "split": "test", "type": typ, "source": "official"} for t, typ in TASKS]
    make_table("scienceworld", rows).to_parquet(path, index=False)
    return path


def run_cells(out: Path, cache_path: Path, max_retries: int = 0) -> list[Path]:
    """Run every golden cell into ``out``; return the Parquet files written (in a fixed order)."""
    from memtrials.config import check_config

    cfg = golden_config(out, cache_path, max_retries)
    models = check_config(cfg)
    from memtrials.envs.scienceworld import env as scienceworld

    before = os.environ.get(scienceworld.JOIN_SWITCH)
    scienceworld.configure(cfg)  # as run_rule does for a pipeline job
    try:
        return _run_cells(cfg, models, out)
    finally:
        if before is None:
            os.environ.pop(scienceworld.JOIN_SWITCH, None)
        else:
            os.environ[scienceworld.JOIN_SWITCH] = before


def _run_cells(cfg: dict[str, Any], models: Any, out: Path) -> list[Path]:
    from memtrials.studies.history import entry as cells
    from memtrials.studies.history.workflow import HistoryWorkflow

    hw = HistoryWorkflow(cfg, models, lambda name: models[name].cell_params())
    tasks = task_table(out / "tasks.parquet")
    prompts = str(REPO / "config" / "prompts" / "actor")
    judge_prompts = str(REPO / "config" / "prompts" / "history")
    files: list[Path] = []
    for cond in ROLLOUTS:
        stem = out / f"rollouts.{cond}"
        asyncio.run(cells.rollouts(cfg, "loop", "scienceworld", cond, hw.cell("loop", "scienceworld"), prompts,
                                   str(tasks), f"{stem}.parquet", f"{stem}.steps.parquet", f"{stem}.calls.parquet"))
        files += [Path(f"{stem}.parquet"), Path(f"{stem}.steps.parquet"), Path(f"{stem}.calls.parquet")]
    raw = out / "rollouts.raw"
    for cond in CONTINUATIONS:
        stem = out / f"continuation.{cond}"
        asyncio.run(cells.continuation(cfg, "loop", "scienceworld", cond, hw.cell("loop", "scienceworld", "continuation"),
                                       prompts, f"{raw}.parquet", f"{raw}.steps.parquet", f"{stem}.parquet",
                                       f"{stem}.steps.parquet", f"{stem}.calls.parquet"))
        files += [Path(f"{stem}.parquet"), Path(f"{stem}.steps.parquet"), Path(f"{stem}.calls.parquet")]
    stem = out / "probe"
    asyncio.run(cells.probe(cfg, "loop", "scienceworld", hw.cell("loop", "scienceworld", "probe"), prompts,
                            judge_prompts, f"{raw}.parquet", f"{raw}.steps.parquet", f"{stem}.parquet",
                            f"{stem}.screen.parquet", f"{stem}.calls.parquet"))
    files += [Path(f"{stem}.parquet"), Path(f"{stem}.screen.parquet"), Path(f"{stem}.calls.parquet")]
    return files
