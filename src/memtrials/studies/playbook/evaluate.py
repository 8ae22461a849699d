"""Evaluation of one candidate of one setting on the evaluation tasks.

Section 4 / Appendix A: No playbook, Whole (each run), Best-Full, RBC-cut and RBC each
serve one of the setting's candidates (no playbook, a whole playbook, a curated set), so
the study evaluates every candidate once (one job per candidate) and a method's score is
that of the candidate it serves (:mod:`.analysis`); Figure 6's choices over 1..K runs and
Table 10's parts then need no further episodes.  Every candidate is played on the same
evaluation tasks with the same seeds (:func:`eval_plan`: a task's seeds depend on the
study seed, the benchmark, the task and the seed index only).  Scores are 0-100, averaged
over seeds per task, then over tasks (:func:`memtrials.studies.playbook.analysis.method_score`).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from memtrials.agent.job import open_job
from memtrials.agent.runner import EpisodeSpec
from memtrials.seeds import seed_of
from memtrials.studies.playbook import play
from memtrials.studies.playbook.design import actor_settings, env_options, role_tasks
from memtrials.studies.playbook.records import final_playbook

log = logging.getLogger(__name__)


def eval_plan(tasks: Sequence[str], n_seeds: int, seed: int, env: str) -> list[tuple[str, int, int]]:
    """(task, seed index, episode seed) of every evaluation episode, in task order."""
    return [(t, j, seed_of(seed, "eval", env, t, j)) for t in tasks for j in range(int(n_seeds))]


def served_for(candidate: str, choice_record: Mapping[str, Any], playbooks: Sequence[str]) -> pd.DataFrame:
    """The lessons (playbook order) that ``candidate`` (a name such as ``whole:run1``) serves."""
    by_name = {c["name"]: c for c in choice_record["candidates"]}
    if candidate not in by_name:
        raise ValueError(f"candidate {candidate!r} is not one of {sorted(by_name)}")
    c = by_name[candidate]
    if c["run"] is None:
        return pd.DataFrame(columns=["lesson_id", "text", "tokens"])
    whole = final_playbook(playbooks[int(str(c["run"]).removeprefix("run")) - 1])
    return whole[whole["lesson_id"].isin(set(c["lesson_ids"]))]


async def eval_run(config: Mapping[str, Any], *, model: str, env: str, variant: str, growth: str, candidate: str,
                   cell: Mapping[str, Any], actor_prompts_dir: str, tasks_path: str, choice_path: str,
                   playbooks: Sequence[str], out_episodes: str, out_steps: str, out_calls: str,
                   make_env: Callable[[], Any] | None = None) -> pd.DataFrame:
    """Play ``candidate`` (path form ``curated-run1`` or name ``curated:run1``) on the evaluation tasks."""
    name = candidate if ":" in candidate or candidate == "none" else candidate.replace("-", ":", 1)
    seed, ev = int(cell["seed"]), cell["evaluation"]
    tasks = role_tasks(pd.read_parquet(tasks_path), cell["splits"]["eval"], ev["tasks"], seed, tasks_path,
                       "playbook.evaluation.tasks")
    record = json.loads(Path(choice_path).read_text(encoding="utf-8"))
    served = served_for(name, record, playbooks)
    tokens = int(served["tokens"].sum()) if len(served) else 0
    cell_id = f"playbook/{growth}/{model}/{env}/{variant}/eval/{candidate}"
    specs = [EpisodeSpec(env, t, f"{cell_id}/{t}/{j}", s, actor_settings(model, cell["actor"], s),
                         memory=play.view_of(served, cell["grouped"]),
                         columns=play.columns(round="eval", split="eval", candidate=name, design_episode=j,
                                              served_tokens=tokens))
             for t, j, s in eval_plan(tasks, int(ev["seeds"]), seed, env)]
    async with open_job(config, cell_id, out_calls, actor_prompts_dir, env=env, in_flight=int(cell["in_flight"]),
                        episodes=len(specs), env_options=env_options(cell, env), make_env=make_env) as (runner, client):
        client.expect(len(specs) * int(cell["actor"]["max_actions"]))
        episodes = await runner.concurrent(specs)
    log.info("%s: %d episodes, %d won", cell_id, len(episodes), sum(bool(e.summary["won"]) for e in episodes))
    return play.write(episodes, model, env, f"{variant}/{growth}/eval/{candidate}", out_episodes, out_steps)
