"""ALFWorld: the offline game generator and the adapter on ALFWorld's own TextWorld engine."""

from __future__ import annotations

import json
import shutil

import pytest

from memtrials.envs.scripted import GoldAgent, RandomAgent, run_episode
from memtrials.envs.alfworld.env import AlfworldEnv, game_dirs, task_rows
from memtrials.envs.alfworld.gen import GameSpec, build_problem, plan_specs
from memtrials.envs.alfworld.scenes import TASK_TYPES
from memtrials.envs.base import RestoreMismatch
from memtrials.envs.tasks import check_disjoint, make_table, sample_tasks
from tests.envs.conftest import SMALL_SIZES, random_prefix, restore_in_fresh_process

pytestmark = pytest.mark.slow


def test_games_cover_all_six_task_types_and_every_split(alf_games):
    root, records = alf_games
    table = make_table("alfworld", task_rows(root))
    assert len(table) == sum(SMALL_SIZES.values()) == len(records)
    assert sorted(table["type"]) == sorted(TASK_TYPES) and set(table["split"]) == set(SMALL_SIZES)
    check_disjoint(table, ["type", "object", "scene"], ["train", "practice", "eval"])


def test_plan_puts_all_six_task_types_in_every_split():
    plan = [s for s, _ in plan_specs(0, {"train": 6, "practice": 6, "eval": 6})]
    for split in SMALL_SIZES:
        assert sorted(s.task_type for s in plan if s.split == split) == sorted(TASK_TYPES)


def test_the_games_per_type_are_the_plans_quotas_known_before_generation():
    """memtrials.envs.catalog counts a split's games of given types before any game exists
    (the config checks): the plan for the default's sizes meets alfworld_gen.type_counts."""
    from collections import Counter

    from memtrials.envs.alfworld.gen import type_counts
    from tests.conftest import base_config

    for sizes in (SMALL_SIZES, base_config()["envs"]["alfworld"]["sizes"], {"train": 7, "practice": 5, "eval": 11}):
        counted = Counter((s.split, s.task_type) for s, _ in plan_specs(0, sizes))
        expected = {(split, t): n for split, per in type_counts(sizes).items() for t, n in per.items() if n}
        assert dict(counted) == expected


def test_games_load_in_alfworlds_own_alfredtwenv(alf_games):
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    root, _ = alf_games
    cfg = {"env": {"goal_desc_human_anns_prob": 0, "task_types": [1, 2, 3, 4, 5, 6]},
           "dataset": {"data_path": str(root / "train"), "eval_id_data_path": str(root / "eval"),
                       "eval_ood_data_path": str(root / "practice"), "num_train_games": -1, "num_eval_games": -1}}
    assert AlfredTWEnv(cfg, train_eval="train").num_games == SMALL_SIZES["train"]
    assert AlfredTWEnv(cfg, train_eval="eval_in_distribution").num_games == SMALL_SIZES["eval"]


def test_each_game_is_solvable_and_stores_its_walkthrough(alf_games):
    root, _ = alf_games
    for folder in game_dirs(root):
        game = json.loads((folder / "game.tw-pddl").read_text())
        assert game["solvable"] is True and game["walkthrough"]
        assert "UNKNOWN GOAL" not in game["grammar"]


def test_generation_is_deterministic_in_the_seed():
    a = [s for s, _ in plan_specs(0, SMALL_SIZES)]
    assert a == [s for s, _ in plan_specs(0, SMALL_SIZES)]
    assert a != [s for s, _ in plan_specs(1, SMALL_SIZES)]
    assert build_problem(a[0]) == build_problem(a[0])
    assert build_problem(a[0], attempt=1)[0] != build_problem(a[0])[0]


def test_default_sizes_have_disjoint_triples_and_300_games():
    sizes = {"train": 120, "practice": 60, "eval": 134}
    plan = [s for s, _ in plan_specs(0, sizes)]
    assert len(plan) == 314
    seen: dict[tuple, str] = {}
    for spec in plan:
        assert seen.setdefault((spec.task_type, spec.obj, spec.scene), spec.split) == spec.split


def test_reset_step_won_with_walkthrough(alf_env, alf_games):
    _, records = alf_games
    task_id = records[0]["spec"].task_id
    obs = alf_env.reset(task_id)
    assert obs.step == 0 and "Welcome to TextWorld, ALFRED" in obs.text and obs.admissible
    assert alf_env.task_description().startswith("Your task is to: ")
    for action in records[0]["walkthrough"]:
        assert not obs.won
        obs = alf_env.step(action)
    assert obs.won and obs.done and obs.score == 1.0
    bad = alf_env.step("fly to the moon")
    assert bad.text == "Nothing happens."


def test_gold_agent_solves_every_split_random_agent_rarely(alf_env, alf_games):
    root, _ = alf_games
    table = make_table("alfworld", task_rows(root))
    sample = sample_tasks(table, per_split=2, seed=0)
    assert set(sample["split"]) == set(SMALL_SIZES)
    gold = [run_episode(alf_env, GoldAgent(), t, max_steps=100) for t in sample["task_id"]]
    assert all(ep.won for ep in gold), [ep.task_id for ep in gold if not ep.won]
    rand = [run_episode(alf_env, RandomAgent(0), t, max_steps=15) for t in sample["task_id"]]
    assert sum(ep.won for ep in rand) <= 1


def test_restore_after_random_prefix_same_and_fresh_process(alf_env, alf_games, tmp_path):
    root, records = alf_games
    task_id = records[3]["spec"].task_id
    actions, texts = random_prefix(alf_env, task_id, 20, seed=1)
    assert len(actions) == 20
    assert alf_env.restore(task_id, actions, texts).text == texts[-1]
    other = AlfworldEnv(root=root)
    assert other.restore(task_id, actions, texts).text == texts[-1]
    assert restore_in_fresh_process("alfworld", {"root": str(root)}, task_id, actions, texts, tmp_path) == texts[-1]
    with pytest.raises(RestoreMismatch):
        alf_env.restore(task_id, actions, texts[:-1] + ["something else"])


def test_official_data_layout_via_alfworld_data(alf_games, tmp_path, monkeypatch):
    """A folder laid out like the official json_2.1.1 data runs through the same adapter."""
    root, records = alf_games
    official = tmp_path / "alfworld_data" / "json_2.1.1"
    folders = {"train": "train", "practice": "valid_seen", "eval": "valid_unseen"}
    for record in records:
        src = root / record["spec"].task_id
        shutil.copytree(src, official / folders[record["spec"].split] / src.parent.name / src.name)
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "alfworld_data"))
    rows = task_rows(official, official=True)
    assert {r["source"] for r in rows} == {"official"}
    held_out = [r for r in rows if r["split"] == "eval_out_of_distribution"]
    assert len(held_out) == SMALL_SIZES["eval"] and held_out[0]["task_id"].startswith("valid_unseen/")
    assert sorted({r["split"] for r in rows}) == ["eval_in_distribution", "eval_out_of_distribution", "train"]
    env = AlfworldEnv(official=True)
    obs = env.reset(held_out[0]["task_id"])
    for action in env.gold_actions(held_out[0]["task_id"]):
        obs = env.step(action)
    assert obs.won


def test_missing_game_and_official_data_errors_name_the_fix(alf_env, monkeypatch):
    with pytest.raises(FileNotFoundError, match="results/tasks/alfworld.parquet"):
        alf_env.reset("eval/no-such-game/trial_00000")
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    with pytest.raises(FileNotFoundError, match="ALFWORLD_DATA"):
        AlfworldEnv(official=True)


def test_plan_rejects_unknown_split():
    with pytest.raises(ValueError, match="unknown split 'test'"):
        plan_specs(0, {"test": 3})
    assert GameSpec("eval", 3, "pick_and_place_simple", "Apple", "Fridge", 1, "s").task_id == \
        "eval/pick_and_place_simple-Apple-None-Fridge-1/trial_00003"


def test_several_envs_in_threads_and_processes(alf_games):
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
    import multiprocessing as mp

    root, records = alf_games
    tasks = [r["spec"].task_id for r in records[:4]]
    envs = [AlfworldEnv(root=root) for _ in range(2)]

    def play(k: int) -> list[bool]:  # one env per thread, two games each
        return [run_episode(envs[k], GoldAgent(), t, max_steps=100).won for t in tasks[k::2]]

    with ThreadPoolExecutor(2) as pool:
        assert all(all(won) for won in pool.map(play, range(2)))
    with ProcessPoolExecutor(2, mp_context=mp.get_context("fork")) as pool:
        assert all(pool.map(_play_in_process, [(str(root), t) for t in tasks]))


def _play_in_process(args: tuple[str, str]) -> bool:
    root, task_id = args
    return run_episode(AlfworldEnv(root=root), GoldAgent(), task_id, max_steps=100).won
