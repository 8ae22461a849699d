"""The environment check behind ``results/envcheck/{env}.parquet``.

A seeded sample of each split of the task table is played by the gold agent and by the
random agent (:mod:`memtrials.envs.scripted`); one row per (task, agent).  The gold agent must
win at least ``gold_min_success`` of its episodes (a task it cannot solve is a generator
or adapter bug); the random agent's rate is recorded and should be low.
"""

from __future__ import annotations

import logging

import pandas as pd

from memtrials.envs.scripted import GoldAgent, RandomAgent, run_episode
from memtrials.envs.base import Env
from memtrials.envs.tasks import sample_tasks

log = logging.getLogger(__name__)

CHECK_COLUMNS: dict[str, str] = {
    "task_id": "string", "env": "string", "split": "string", "type": "string", "agent": "string",
    "won": "bool", "score": "float64", "steps": "int64", "seconds": "float64",
}


class GoldCheckFailed(RuntimeError):
    """The gold agent solved fewer sampled tasks than required."""


def run_check(env: Env, tasks: pd.DataFrame, per_split: int, seed: int, random_steps: int = 30,
              gold_max_steps: int = 300) -> pd.DataFrame:
    """Play gold and random agents on ``per_split`` sampled tasks of every split."""
    sample = sample_tasks(tasks, per_split, seed)
    rows = []
    for _, task in sample.iterrows():
        for agent, budget in ((GoldAgent(), gold_max_steps), (RandomAgent(seed), random_steps)):
            ep = run_episode(env, agent, task["task_id"], max_steps=budget)
            rows.append({"task_id": task["task_id"], "env": env.name, "split": task["split"],
                         "type": task["type"], "agent": agent.name, "won": ep.won, "score": ep.score,
                         "steps": ep.steps, "seconds": ep.seconds})
            log.info("%s %s %s: won=%s steps=%d (%.1fs)", env.name, agent.name, task["task_id"],
                     ep.won, ep.steps, ep.seconds)
    return pd.DataFrame.from_records(rows, columns=list(CHECK_COLUMNS)).astype(CHECK_COLUMNS)


def success_rates(check: pd.DataFrame) -> dict[str, float]:
    """Share of won episodes per agent."""
    return {a: float(g["won"].mean()) for a, g in check.groupby("agent")}


def require_gold(check: pd.DataFrame, minimum: float) -> None:
    """Raise :class:`GoldCheckFailed`, naming the unsolved tasks, if gold success < ``minimum``."""
    gold = check[check["agent"] == "gold"]
    if gold.empty:
        raise GoldCheckFailed("envcheck: no gold episodes were played (empty task sample)")
    rate = float(gold["won"].mean())
    if rate < minimum:
        failed = gold.loc[~gold["won"], "task_id"].tolist()
        raise GoldCheckFailed(
            f"envcheck {gold['env'].iloc[0]}: gold agent won {rate:.0%} < {minimum:.0%} of sampled tasks; "
            f"unsolved: {failed[:10]}"
        )
