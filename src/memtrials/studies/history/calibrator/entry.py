"""Entry points of the calibrator's rules (``workflow/rules/calibrator.smk``), one per rule,
with keyword arguments (called by the thin ``workflow/scripts/calibrator_*.py``)."""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

import pandas as pd

from memtrials.agent.records import table
from memtrials.io import write_parquet
from memtrials.seeds import seed_of
from memtrials.studies.history.calibrator import compare, dataset, generate, screen
from memtrials.studies.history.calibrator.contexts import eligible, sample_contexts
from memtrials.studies.history.calibrator.schemas import CONTEXT_SCHEMA
from memtrials.studies.history.calibrator.rollouts import training_tasks
from memtrials.studies.history.design import actor_settings
from memtrials.studies.history.rollouts import rollout_cell

log = logging.getLogger(__name__)


async def sources(config: Mapping[str, Any], *, model: str, env: str, cell: Mapping[str, Any], actor_prompts_dir: str,
                  tasks_path: str, out_episodes: str, out_steps: str, out_calls: str) -> None:
    """Raw rollouts of one source actor on the calibrator's training split, after checking that
    none of its tasks is an evaluation task of the history study (section 6.1)."""
    tasks = training_tasks(tasks_path, {**cell, "tasks_per_cell": cell["sources"]["tasks_per_cell"]}, env)
    seeds = [seed_of(int(cell["seed"]), env, t) for t in tasks]
    settings = actor_settings(model, "raw", cell["actor"])
    await rollout_cell(config, model=model, env=env, condition="calibrator-source", tasks=tasks, seeds=seeds,
                       settings=settings, actor_prompts_dir=actor_prompts_dir, in_flight=int(cell["in_flight"]),
                       out_episodes=out_episodes, out_steps=out_steps, out_calls=out_calls,
                       env_options=cell["env_options"])


def contexts(*, sources: Sequence[Mapping[str, str]], count: int, seed: int, out: str) -> pd.DataFrame:
    """Sample the decision contexts from every source cell (``{model, env, episodes, steps}``)."""
    groups = {}
    for s in sources:
        groups[(s["model"], s["env"])] = eligible(s["model"], s["env"], pd.read_parquet(s["episodes"]),
                                                  pd.read_parquet(s["steps"]))
    picked = sample_contexts(groups, count, seed)
    t = table([c.row() for c in picked], CONTEXT_SCHEMA)
    write_parquet(t, out)
    log.info("calibrator contexts: %d from %d source cells", len(picked), len(groups))
    return t.to_pandas()


async def generate_(config: Mapping[str, Any], **kw: Any) -> None:
    await generate.generate_stage(config, **kw)


async def screen_(config: Mapping[str, Any], **kw: Any) -> None:
    await screen.screen_stage(config, **kw)


async def compare_(config: Mapping[str, Any], **kw: Any) -> None:
    await compare.compare_stage(config, **kw)


def labels(**kw: Any) -> None:
    dataset.write_labels(**kw)


def dataset_(**kw: Any) -> None:
    dataset.write_dataset(**kw)
