"""The actor loop on real AppWorld tasks (project-authored offline task set): code actions,
the environment in its own process (AppWorld freezes the clock of the process it runs in)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pandas as pd
import pytest

from memtrials.studies.history.design import actor_settings
from memtrials.envs.pool import env_factory
from memtrials.studies.history.rollouts import rollout_cell

from .helpers import is_review

PROMPTS = str(Path(__file__).resolve().parents[2] / "config" / "prompts" / "actor")


def code_policy(body):
    if is_review(body):
        return '{"decision":"CALIBRATE","experience":"The profile lists the supervisor."}'
    if "already taken 0 step(s)" in body["messages"][-1]["content"]:
        return "<think>who am I</think><action>print(apis.supervisor.show_profile())</action>"
    return "<action>\n```python\napis.supervisor.complete_task(answer=3)\n```\n</action>"


@pytest.mark.slow
def test_code_actions_complete_an_appworld_task(loopback, make_config, tmp_path, appworld_root):
    root = appworld_root(["note_tag_count"], 2)
    srv = loopback(policy=code_policy)
    cfg = make_config(srv)
    s = actor_settings("loop", "experience", {"mode": "react", "max_actions": 4, "max_output_tokens": 64})
    eps = asyncio.run(rollout_cell(
        cfg, model="loop", env="appworld", condition="experience", tasks=["hsnotetagcount_2"], seeds=[2],
        settings=s, actor_prompts_dir=PROMPTS, in_flight=1, out_episodes=str(tmp_path / "ep.parquet"),
        out_steps=str(tmp_path / "steps.parquet"), out_calls=str(tmp_path / "calls.parquet"),
        make_env=env_factory("appworld", {"root": str(root)})))
    steps = pd.read_parquet(tmp_path / "steps.parquet")
    assert list(steps["action"]) == ["print(apis.supervisor.show_profile())", "apis.supervisor.complete_task(answer=3)"]
    assert (steps["n_admissible"] == -1).all() and (steps["parse_status"] == "ok").all()
    assert '"first_name": "Ada"' in steps["observation"].iloc[0]
    assert bool(eps["won"].iloc[0]) and eps["termination"].iloc[0] == "won" and eps["final_score"].iloc[0] == 100.0
    assert list(steps["review_decision"].fillna("-")) == ["CALIBRATE", "-"]  # none after the final action


def test_process_env_reports_errors_of_the_child():
    from memtrials.envs.process.child import ProcessEnv

    with pytest.raises(ValueError, match="unknown environment 'nowhere'"):
        ProcessEnv("nowhere")
