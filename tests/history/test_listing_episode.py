"""The ranked listing inside the actor loop: real ScienceWorld, the loopback endpoint."""

from __future__ import annotations

import json

import pytest

from memtrials.agent.listing import list_actions
from memtrials.seeds import seed_of
from memtrials.studies.history.design import actor_settings

from .helpers import repeat_policy
from .test_agent_loop import SW_TASKS, run


@pytest.mark.slow
def test_each_prompt_lists_the_ranked_actions_of_the_task_and_the_observation_it_shows(
        loopback, make_config, tmp_path, sw_make, sw_engines):
    srv = loopback(policy=repeat_policy("look around"))
    cfg = make_config(srv)
    s = actor_settings("loop", "raw", {"mode": "choice", "max_actions": 2, "max_output_tokens": 16,
                                       "max_listed_actions": 10, "listing": "ranked"})
    task = SW_TASKS[1]
    _, steps, _ = run(cfg, tmp_path, "raw", s, tasks=[task], in_flight=1, make=sw_make())
    env = sw_engines[0]
    obs = env.reset(task)
    text = env.task_description()
    seed = seed_of(0, "scienceworld", task)
    for row in steps.sort_values("step").itertuples():
        admissible = obs.admissible if obs.admissible is not None else env.admissible_actions()
        want = list_actions(admissible, 10, f"{seed}:{row.step}", "ranked", text, obs.text)
        assert row.obs_before == obs.text and json.loads(row.shown_actions) == list(want)
        if row.step == 1:  # the room's objects are named: the ranking picks, not the draw
            assert want != list_actions(admissible, 10, f"{seed}:1", "sample")
        obs = env.step(row.action)
