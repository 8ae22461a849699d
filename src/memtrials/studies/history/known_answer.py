"""The history study's known-answer run outside the workflow: ``known_answer(size, seed)``.

What the default run's planted cells do (``history.planted``), at any size and seed, in a
temporary folder: the planted world's task table, the planted agent's rollout cells (the
study's own entry point :func:`.entry.rollouts`: runner, client, cache and records for real),
then :func:`.planted_report.planted_table`.  ``benchmarks/bench_known_answer.py`` runs it at
hundreds of tasks per cell; the tests at a few dozen, over several seeds.
"""

from __future__ import annotations

import asyncio
import copy
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.config import REPO_ROOT, load_config
from memtrials.envs.build import build_task_table
from memtrials.envs.tasks import write_table
from memtrials.studies.history.design import read_tasks
from memtrials.studies.history.entry import rollouts
from memtrials.studies.history.planted_cells import PLANTED_ENV, PLANTED_SPLIT, planted_cell
from memtrials.studies.history.planted_report import planted_table
from memtrials.studies.history.report import with_cells


def planted_config(base: Mapping[str, Any], folder: Path, size: int, seed: int) -> dict[str, Any]:
    """``base`` with its cache in ``folder``, ``size`` planted test tasks per cell drawn by ``seed``."""
    cfg = copy.deepcopy(dict(base))
    cfg["cache"] = {"path": str(folder / "cache" / "llm.sqlite"), "mode": "use", "backend": "sqlite"}
    h = cfg["history"]
    h["seed"] = int(seed)
    h["planted"]["tasks_per_cell"] = int(size)
    sizes = cfg["envs"]["planted"]["sizes"]
    sizes[PLANTED_SPLIT] = max(int(sizes[PLANTED_SPLIT]), int(size))
    return cfg


def known_answer(size: int, seed: int, conditions: Sequence[str] | None = None, *,
                 config: Mapping[str, Any] | None = None, folder: str | Path | None = None,
                 n_boot: int = 2000) -> pd.DataFrame:
    """The planted table of ``size`` tasks per condition (``conditions``: default
    ``history.planted.conditions``), task list and shuffles drawn by ``seed``; ``config``:
    default ``config/config.yaml`` (its ``models_file`` holds the planted entry)."""
    base = config if config is not None else load_config(REPO_ROOT / "config" / "config.yaml")
    if folder is None:
        with tempfile.TemporaryDirectory(prefix="memtrials-known-answer-") as tmp:
            return known_answer(size, seed, conditions, config=base, folder=tmp, n_boot=n_boot)
    folder = Path(folder)
    cfg = planted_config(base, folder, size, seed)
    if not Path(cfg["models_file"]).is_absolute():
        cfg["models_file"] = str(REPO_ROOT / cfg["models_file"])
    from memtrials.config import load_models

    h = cfg["history"]
    name = str(h["planted"]["model"])
    ep = load_models(cfg["models_file"])[name]
    conds = list(conditions or h["planted"]["conditions"])
    cell = planted_cell(h, ep.cell_params())
    table = folder / "tasks" / f"{PLANTED_ENV}.parquet"
    write_table(build_task_table(PLANTED_ENV, cfg["envs"]), table)
    prompts = str(REPO_ROOT / h["actor_prompts_dir"])
    paths = []
    for c in conds:
        stem = folder / "rollouts" / c
        stem.parent.mkdir(parents=True, exist_ok=True)
        asyncio.run(rollouts(cfg, name, PLANTED_ENV, c, cell, prompts, str(table), f"{stem}.parquet",
                             f"{stem}.steps.parquet", f"{stem}.calls.parquet"))
        paths.append(f"{stem}.parquet")
    eps, steps = with_cells(paths)
    tasks = read_tasks(table, int(size), PLANTED_SPLIT, int(seed), PLANTED_ENV)
    sl = {**cell, "model": name, "conditions": conds, "declared": dict(ep.planted.params)}
    return planted_table(eps, steps, tasks, sl, n_boot)
