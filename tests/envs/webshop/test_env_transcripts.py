"""WebShop's text environment against the recording of upstream's (tests/data/webshop/transcripts):
every step of all 413 episodes, the expert and random policies, and the gold agent on the test split."""

from __future__ import annotations

import random
from collections import defaultdict

import pytest

from memtrials.envs.webshop.env import WebShopEnv
from memtrials.envs.webshop.reward import exact_purchase_reward
from tests.envs.webshop.golden import golden


@pytest.fixture(scope="module")
def env() -> WebShopEnv:
    return WebShopEnv()


def test_every_transcript_replays_step_for_step(env: WebShopEnv):
    """Observations, available actions, rewards (value and type: int 0 for an invalid action),
    done flags and the simulated URL of every recorded step are the engine's."""
    episodes = golden("transcripts")
    assert len(episodes) == 413
    engine, steps, purchases = env.engine, 0, 0
    for ep in episodes:
        goal = env.goal(str(ep["goal_index"]))
        for rec in ep["steps"]:
            where = f"{ep['policy']} {ep.get('case', '')} goal {ep['goal_index']} step {rec['t']} ({rec['action']!r})"
            if rec["t"] == 0:
                obs, reward, done = engine.reset(goal, str(goal.index)), None, False
            else:
                obs, reward, done = engine.step(rec["action"])
            assert obs == rec["observation"], where
            assert engine.available_actions() == rec["available"], where
            assert (reward, type(reward)) == (rec["reward"], type(rec["reward"])), where
            assert done == rec["done"], where
            assert engine.url == rec["url"], where
            if done:
                purchases += 1
                assert engine.purchase["asin"] == rec["purchased"]["asin"], where
                assert engine.purchase["options"] == rec["purchased"]["options"], where
            steps += 1
    assert steps == 4385 and purchases > 200


def test_gold_actions_are_the_recorded_expert_and_score_the_same(env: WebShopEnv):
    for ep in (e for e in golden("transcripts") if e["policy"] == "expert"):
        task = str(ep["goal_index"])
        actions = env.gold_actions(task)
        assert actions == [s["action"] for s in ep["steps"][1:]], task
        obs = env.restore(task, actions, [s["observation"] for s in ep["steps"][1:]])
        assert obs.done and obs.score == ep["final_reward"] and obs.won == (ep["final_reward"] == 1.0)


def test_gold_agent_matches_upstream_on_the_whole_test_split(env: WebShopEnv):
    """Goals 0-499: the gold agent buys the target (goal 444 only after a search for its title:
    neither recorded search lists it) with the goal's options; its reward equals the reward
    module's for that purchase on every goal, upstream's expert's (goals 0-199) and upstream's
    recorded reward for it (golden rewards, wherever the target is among the recorded top-10s:
    462 goals)."""
    expert = {e["goal_index"]: e["final_reward"] for e in golden("transcripts") if e["policy"] == "expert"}
    target = {r["goal_index"]: r["with_goal_options"]["reward"] for r in golden("rewards") if r["is_target"]}
    checked = defaultdict(int)
    for index in range(500):
        obs = env.reset(str(index))
        actions = env.gold_actions(str(index))
        for action in actions:
            obs = env.step(action)
        assert (index == 444) == (len([a for a in actions if a.startswith("search[")]) == 3), index
        assert obs.done and obs.info["purchase"]["asin"] == env.goal(str(index)).asin, index
        assert obs.score == exact_purchase_reward(env.catalog, env.goal(str(index))), index
        for name, ref in (("expert", expert), ("rewards", target)):
            if index in ref:
                assert obs.score == ref[index], (index, name)
                checked[name] += 1
    assert checked == {"expert": 200, "rewards": 462}, dict(checked)


def test_random_action_is_the_recorded_random_policy(env: WebShopEnv):
    """``random_action`` with ``random.Random(goal index)`` draws the recorded random episodes."""
    for ep in (e for e in golden("transcripts") if e["policy"] == "random"):
        task, rng = str(ep["goal_index"]), random.Random(ep["goal_index"])
        env.reset(task)
        for rec in ep["steps"][1:]:
            action = env.random_action(rng)
            assert action == rec["action"], (task, rec["t"])
            assert env.step(action).text == rec["observation"]
