"""Candidate scoring and the choice: RBC's 2K+1 candidates on fresh practice episodes.

Section 3.3.  The candidates are the K curated sets, the K whole playbooks and no
playbook (:func:`memtrials.curation.rbc_candidates`).  Every candidate is played on the
same fresh practice episodes (:func:`memtrials.curation.choice_episodes`: the ``choice``
stream, its own seed; no episode, and no model call, of the estimate rounds is reused:
each episode's sample index is its own actor seed).  RBC serves the candidate with the
highest practice score; Best-Full chooses among the whole playbooks and no playbook on the
same episodes; RBC-cut is the curated set of each run every same-budget baseline cuts
(``cut_runs``), no choice.  The tie rule
(:func:`memtrials.curation.choose`): scores within a relative 1e-12 tie, the tied
candidate serving fewer tokens wins, then the earlier in candidate order (curated, whole,
none).  The choice reads practice episodes only: evaluation episodes do not exist yet when
this job runs (they depend on its output), and every score row says ``split: practice``.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import pandas as pd

from memtrials.agent.job import open_job
from memtrials.agent.runner import EpisodeSpec
from memtrials.curation import Candidate, best_full_candidates, choice_episodes, choose, rbc_candidates
from memtrials.io import atomic_write_json, write_parquet
from memtrials.seeds import seed_of
from memtrials.studies.playbook import play
from memtrials.studies.playbook.design import actor_settings, env_options, role_tasks
from memtrials.studies.playbook.records import SCORES_SCHEMA, final_playbook

log = logging.getLogger(__name__)


def slug(name: str) -> str:
    """A candidate name as a path part: ``curated:run1`` -> ``curated-run1``."""
    return name.replace(":", "-")


def candidate_lessons(runs: Sequence[str], playbooks: Sequence[str], practice_records: Sequence[str]
                      ) -> tuple[list[Candidate], dict[str, pd.DataFrame]]:
    """RBC's candidates in order and the lessons (``lesson_id``, ``text``, ``tokens``) each serves."""
    lessons: dict[str, pd.DataFrame] = {}
    curated_tok, whole_tok = [], []
    for r, pb, rec in zip(runs, playbooks, practice_records):
        whole = final_playbook(pb)
        ids = json.loads(Path(rec).read_text(encoding="utf-8"))["curated"]["lesson_ids"]
        cur = whole[whole["lesson_id"].isin(set(ids))] if len(whole) else whole
        lessons[f"curated:{r}"], lessons[f"whole:{r}"] = cur, whole
        curated_tok.append(int(cur["tokens"].sum()) if len(cur) else 0)
        whole_tok.append(int(whole["tokens"].sum()) if len(whole) else 0)
    lessons["none"] = pd.DataFrame(columns=["lesson_id", "text", "tokens"])
    return rbc_candidates(runs, curated_tok, whole_tok), lessons


def pick(cands: Sequence[Candidate], scores: pd.DataFrame) -> dict[str, Any]:
    c = choose(cands, scores)
    top = c.scores.set_index("name").loc[c.chosen.name]
    return {"chosen": c.chosen.name, "kind": c.chosen.kind, "run": c.chosen.run, "tokens": c.chosen.tokens,
            "score": float(top["score"]), "tied": list(c.tied), "candidates": [x.name for x in cands]}


def decide(runs: Sequence[str], cands: Sequence[Candidate], scores: pd.DataFrame, k: int | None = None,
           cut_runs: Sequence[str] | None = None) -> dict[str, Any]:
    """RBC and Best-Full over the first ``k`` runs (Table 1's K; None: all), RBC-cut (the curated
    set of each of ``cut_runs``, scored as their mean, like every same-budget baseline; None:
    run 1), and both choices over the first 1..len(runs) runs (Figure 6, Tables 10 and 13)."""
    tokens = {c.name: c.tokens for c in cands}
    by_runs = []
    for j in range(1, len(runs) + 1):
        sub = list(runs[:j])
        rbc_j = rbc_candidates(sub, [tokens[f"curated:{r}"] for r in sub], [tokens[f"whole:{r}"] for r in sub])
        bf_j = best_full_candidates(sub, [tokens[f"whole:{r}"] for r in sub])
        by_runs.append({"runs": j, "rbc": pick(rbc_j, scores), "best_full": pick(bf_j, scores)})
    head = by_runs[(len(runs) if k is None else int(k)) - 1]
    cut = list(cut_runs) if cut_runs is not None else [runs[0]]
    return {"rbc": head["rbc"], "best_full": head["best_full"], "k": int(head["runs"]),
            "rbc_cut": [f"curated:{r}" for r in cut], "cut_runs": cut, "by_runs": by_runs}


async def choice_run(config: Mapping[str, Any], *, model: str, env: str, variant: str, growth: str,
                     cell: Mapping[str, Any], actor_prompts_dir: str, tasks_path: str, playbooks: Sequence[str],
                     practice_records: Sequence[str], out_scores: str, out_episodes: str, out_steps: str,
                     out_calls: str, out_record: str, make_env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Score every candidate on the same fresh practice episodes and choose (module docstring)."""
    seed = int(cell["seed"])
    runs = [f"run{k}" for k in range(1, len(playbooks) + 1)]
    practice = role_tasks(pd.read_parquet(tasks_path), cell["splits"]["practice"],
                          int(cell["measurement"]["practice_tasks"]), seed, tasks_path,
                          "playbook.measurement.practice_tasks")
    cands, lessons = candidate_lessons(runs, playbooks, practice_records)
    design = choice_episodes(practice, int(cell["choice"]["episodes"]), seed=seed_of(seed, "choice", env, variant,
                                                                                     growth))
    cell_id = f"playbook/{growth}/{model}/{env}/{variant}/choice"
    specs = []
    for c in cands:
        served = lessons[c.name]
        for row in design.itertuples(index=False):
            s = int(row.actor_seed)
            specs.append(EpisodeSpec(
                env, str(row.task_id), f"{cell_id}/{slug(c.name)}/{int(row.episode):04d}", s,
                actor_settings(model, cell["actor"], s), memory=play.view_of(served, cell["grouped"]),
                columns=play.columns(round="choice", split="practice", candidate=c.name,
                                     design_episode=int(row.episode), served_tokens=c.tokens)))
    async with open_job(config, cell_id, out_calls, actor_prompts_dir, env=env, in_flight=int(cell["in_flight"]),
                        episodes=len(specs), env_options=env_options(cell, env), make_env=make_env) as (runner, client):
        client.expect(len(specs) * int(cell["actor"]["max_actions"]))
        episodes = await runner.concurrent(specs)
    play.write(episodes, model, env, f"{variant}/{growth}/choice", out_episodes, out_steps)
    scores = pd.DataFrame({
        "candidate": [e.summary["candidate"] for e in episodes],
        "episode": [int(e.summary["design_episode"]) for e in episodes],
        "task_id": [e.summary["task_id"] for e in episodes],
        "episode_id": [e.summary["episode_id"] for e in episodes],
        "split": [e.summary["split"] for e in episodes],
        "score": [play.score(e.summary, env) for e in episodes]})
    write_parquet(scores, out_scores, schema=SCORES_SCHEMA)
    record = {"model": model, "env": env, "variant": variant, "growth": growth, "runs": runs,
              "practice_tasks": practice, "episodes": int(len(design)),
              "design": design.to_dict("records"),
              "candidates": [{"name": c.name, "kind": c.kind, "run": c.run, "tokens": c.tokens,
                              "lesson_ids": [str(x) for x in lessons[c.name]["lesson_id"]],
                              "practice_score": float(scores.loc[scores["candidate"] == c.name, "score"].mean())}
                             for c in cands],
              **decide(runs, cands, scores, cell["choice"]["runs"], cell.get("cut_runs"))}
    atomic_write_json(out_record, record)
    log.info("%s: RBC serves %s (%.3f), Best-Full %s", cell_id, record["rbc"]["chosen"], record["rbc"]["score"],
             record["best_full"]["chosen"])
    return record
