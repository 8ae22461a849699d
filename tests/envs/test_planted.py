"""The planted world (memtrials.envs.planted): fast, deterministic, restorable, readable."""

from __future__ import annotations

import random
import time

import pytest

from memtrials.envs import make_env
from memtrials.envs.base import RestoreMismatch
from memtrials.envs.build import build_task_table, env_options
from memtrials.envs.catalog import allowed_splits, known_task_types, split_size
from memtrials.envs.check import run_check, success_rates
from memtrials.envs.planted.splits import SPLITS
from memtrials.envs.planted.world import ACTIONS, STEPS, TASK_TYPES, make_task, parse_id, right_action

SIZES = {"train": 30, "practice": 15, "test": 31}
CFG = {"seed": 0, "planted": {"sizes": SIZES}, "check": {"per_split": 3, "random_steps": 30, "gold_min_success": 1.0}}


def test_the_task_table_has_three_splits_and_three_types_and_the_catalog_counts_it():
    df = build_task_table("planted", CFG)
    assert list(df.columns) == ["task_id", "env", "split", "type", "source", "detail"]
    assert df.groupby("split").size().to_dict() == SIZES
    assert set(df["type"]) == set(TASK_TYPES) and len(TASK_TYPES) >= 3
    assert allowed_splits("planted", CFG) == SPLITS
    assert known_task_types("planted", CFG)[0] == tuple(sorted(TASK_TYPES))
    for split in SIZES:
        for types in (None, ["vault"], ["relay", "depot"]):
            want = int(((df["split"] == split) & (df["type"].isin(types) if types else True)).sum())
            assert split_size("planted", split, CFG, types=types)[0] == want
    assert split_size("planted", None, CFG)[0] == len(df)
    assert env_options(CFG, "planted") == {}


def test_tasks_are_a_function_of_their_id_with_a_few_steps_and_a_handful_of_actions():
    ids = build_task_table("planted", CFG)["task_id"]
    for tid in ids:
        task = make_task(tid)
        assert task == make_task(tid)
        assert STEPS[0] <= len(task.steps) <= STEPS[1]
        for step in task.steps:
            assert ACTIONS[0] <= len(step.actions) <= ACTIONS[1] and len(set(step.actions)) == len(step.actions)
            assert step.right in step.actions
    assert len({make_task(t).steps for t in ids}) == len(ids)
    with pytest.raises(ValueError, match="not a planted task id"):
        parse_id("test-nosuchtype-0001")


def test_a_reader_of_the_observation_wins_every_task_and_episodes_take_milliseconds():
    env = make_env("planted")
    t0 = time.perf_counter()
    ids = list(build_task_table("planted", CFG)["task_id"])
    for tid in ids:
        obs = env.reset(tid)
        while not obs.done:
            action = right_action(obs.text, obs.admissible)
            assert action is not None, obs.text
            obs = env.step(action)
        assert obs.won and obs.score == 1.0
    per_episode = (time.perf_counter() - t0) / len(ids)
    assert per_episode < 0.005, per_episode


def test_a_wrong_action_leaves_the_state_unchanged_so_a_repetition_is_defined():
    env = make_env("planted")
    first = env.reset("test-relay-0002")
    wrong = next(a for a in first.admissible if a != make_task("test-relay-0002").steps[0].right)
    a = env.step(wrong)
    b = env.step(wrong)
    assert a.text == b.text and a.admissible == b.admissible == first.admissible
    assert not a.done and a.score == 0.0 and a.step == 1 and b.step == 2
    assert right_action(a.text, a.admissible) == right_action(first.text, first.admissible)


def test_restore_to_step_k_replays_and_checks_the_recorded_observations():
    env = make_env("planted")
    tid = "train-depot-0004"
    task = make_task(tid)
    rng = random.Random(3)
    obs = env.reset(tid)
    actions, texts = [], []
    for _ in range(6):
        action = task.steps[obs.info["planted_step"]].right if rng.random() < 0.5 else rng.choice(obs.admissible)
        obs = env.step(action)
        actions.append(action)
        texts.append(obs.text)
        if obs.done:
            break
    for k in range(len(actions) + 1):
        other = make_env("planted")
        restored = other.restore(tid, actions[:k], texts[:k])
        assert restored.text == (texts[k - 1] if k else env.reset(tid).text)
    bad = list(texts)
    bad[0] = "something else"
    with pytest.raises(RestoreMismatch, match="step 1"):
        make_env("planted").restore(tid, actions, bad)


def test_the_environment_check_gold_wins_random_rarely():
    df = build_task_table("planted", CFG)
    env = make_env("planted", **env_options(CFG, "planted"))
    check = run_check(env, df, 3, 0, random_steps=5)
    rates = success_rates(check)
    assert rates["gold"] == 1.0 and rates["random"] < 0.5
    assert set(check["split"]) == set(SPLITS)


def test_max_steps_ends_the_episode():
    env = make_env("planted", max_steps=2)
    env.reset("test-vault-0000")
    env.step("no")
    obs = env.step("no")
    assert obs.done and not obs.won


def test_every_code_of_a_task_is_distinct_so_strings_of_different_steps_differ():
    for tid in build_task_table("planted", CFG)["task_id"]:
        actions = [a for s in make_task(tid).steps for a in s.actions]
        assert len(actions) == len(set(actions))
