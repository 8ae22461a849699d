"""The actor loop and the reference continuation on real ALFWorld games (generated offline)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pandas as pd
import pytest

from memtrials.seeds import seed_of
from memtrials.studies.history.continuation import continuation_cell
from memtrials.studies.history.design import actor_settings
from memtrials.studies.history.rollouts import rollout_cell

from .helpers import gold_policy

PROMPTS = str(Path(__file__).resolve().parents[2] / "config" / "prompts" / "actor")


@pytest.fixture(scope="module")
def games(tmp_path_factory):
    from memtrials.envs.alfworld.env import AlfworldEnv
    from memtrials.envs.alfworld.gen import generate

    root = tmp_path_factory.mktemp("alf") / "games"
    records = generate(root, seed=0, sizes={"train": 0, "practice": 0, "eval": 2}, workers=1)
    env = AlfworldEnv(root=root)
    try:
        gold = {}
        for r in records:
            tid = r["spec"].task_id
            env.reset(tid)
            gold[env.task_description()] = (tid, env.gold_actions(tid))
    finally:
        env.close()
    return root, gold


@pytest.mark.slow
def test_gold_policy_wins_alfworld_and_restore_replays_the_source(loopback, make_config, tmp_path, games):
    from memtrials.envs.alfworld.env import AlfworldEnv

    root, gold = games
    srv = loopback(policy=gold_policy({d: a for d, (_, a) in gold.items()}))
    cfg = make_config(srv)
    tasks = [tid for tid, _ in gold.values()]
    make = lambda: AlfworldEnv(root=root)  # noqa: E731
    s = actor_settings("loop", "causal", {"mode": "choice", "max_actions": 30, "max_output_tokens": 32})
    eps = asyncio.run(rollout_cell(
        cfg, model="loop", env="alfworld", condition="causal", tasks=tasks,
        seeds=[seed_of(0, "alfworld", t) for t in tasks], settings=s, actor_prompts_dir=PROMPTS, in_flight=2,
        out_episodes=str(tmp_path / "gold.parquet"), out_steps=str(tmp_path / "gold.steps.parquet"),
        out_calls=str(tmp_path / "gold.calls.parquet"), make_env=make))
    assert eps["won"].all() and (eps["termination"] == "won").all()
    steps = pd.read_parquet(tmp_path / "gold.steps.parquet")
    assert (steps["parse_status"] == "ok").all() and (steps["n_admissible"] > 0).all()

    # an unsuccessful source: the gold path cut short by the budget, then continued after a restore
    short = actor_settings("loop", "raw", {"mode": "choice", "max_actions": 3, "max_output_tokens": 32})
    asyncio.run(rollout_cell(
        cfg, model="loop", env="alfworld", condition="raw", tasks=tasks[:1], seeds=[1], settings=short,
        actor_prompts_dir=PROMPTS, in_flight=1, out_episodes=str(tmp_path / "raw.parquet"),
        out_steps=str(tmp_path / "raw.steps.parquet"), out_calls=str(tmp_path / "raw.calls.parquet"), make_env=make))
    src = pd.read_parquet(tmp_path / "raw.steps.parquet")
    cont = asyncio.run(continuation_cell(
        cfg, model="loop", env="alfworld", condition="reference", episodes_path=str(tmp_path / "raw.parquet"),
        steps_path=str(tmp_path / "raw.steps.parquet"), n_sources=1, seed=0, settings=s, actor_prompts_dir=PROMPTS,
        in_flight=1, out_episodes=str(tmp_path / "c.parquet"), out_steps=str(tmp_path / "c.steps.parquet"),
        out_calls=str(tmp_path / "c.calls.parquet"), make_env=make))
    c_steps = pd.read_parquet(tmp_path / "c.steps.parquet")
    assert int(cont["restored_step"].iloc[0]) == 1
    assert c_steps["obs_before"].iloc[0] == src["observation"].iloc[0]  # the state after action 1
    assert bool(cont["won"].iloc[0])  # the gold path resumed from step 2 still wins
