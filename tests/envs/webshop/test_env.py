"""WebShop behind the Env interface: actions, scores, the step cap, restore, the task table and
its splits, registration (make_env, load_tasks, the workflow's catalog checks) and the env check."""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest

from memtrials.config import ConfigError
from memtrials.envs import catalog as env_catalog
from memtrials.envs import load_tasks, make_env
from memtrials.envs.base import RestoreMismatch
from memtrials.envs.build import build_task_table, run_envcheck, setup_webshop
from memtrials.envs.tasks import ENV_NAMES, detail, select_tasks, write_table
from memtrials.envs.webshop.env import SEARCH_ACTION, WebShopEnv
from tests.envs.webshop.golden import golden

ENVS_CFG = {"seed": 0, "webshop": {"root": None},
            "check": {"per_split": 2, "random_steps": 15, "gold_min_success": 0.95}}


@pytest.fixture(scope="module")
def env() -> WebShopEnv:
    return WebShopEnv()


@pytest.fixture(scope="module")
def table():
    return build_task_table("webshop", ENVS_CFG)


def test_actions_scores_and_admissible_list(env: WebShopEnv):
    obs = env.reset("1")
    assert obs.step == 0 and obs.admissible == (SEARCH_ACTION,) and obs.info["has_search_bar"]
    assert env.task_description().startswith("Find me butt lifting")
    bad = env.step("click[buy now]")  # not on this page: upstream's int 0, page unchanged
    assert bad.text == obs.text and bad.reward == 0.0 and not bad.info["valid"] and not bad.done
    res = env.step("search[women's shorts]")
    assert res.info["valid"] and "click[next >]" in res.admissible and "click[< prev]" not in res.admissible
    assert all(a.startswith("click[") for a in res.admissible)
    item = env.step("click[b09qcp4579]")
    assert {"click[buy now]", "click[black]", "click[3x-large]", "click[description]"} <= set(item.admissible)
    env.step("click[black]")
    env.step("click[3x-large]")
    done = env.step("click[buy now]")
    assert done.done and done.won and done.score == 1.0 and done.admissible == ()
    assert done.info["purchase"]["options"] == {"color": "black", "size": "3x-large"}
    after = env.step("search[women's shorts]")  # upstream still answers; the episode stays over
    assert after.done and after.won and after.score == 1.0 and after.reward == 0.0


def test_max_steps_ends_an_episode_without_a_purchase():
    env = WebShopEnv(max_steps=3)
    env.reset("0")
    assert not env.step("search[pillow]").done
    assert not env.step("click[next >]").done
    last = env.step("click[next >]")
    assert last.done and not last.won and last.score == 0.0


def test_url_routing_quirk_is_kept(env: WebShopEnv):
    """Upstream routes < Prev by the page names the URL contains, search words included."""
    env.reset("0")
    res = env.step("search[search_results pillow]")
    first = next(c for c in res.info["clickables"] if c.startswith("b0"))
    env.step(f"click[{first}]")
    back = env.step("click[< prev]")  # the item page's URL holds 'search_results': back to page 0
    assert "[SEP] Page 0 (Total results: " in back.text and not any(c.startswith("b0") for c in back.info["clickables"])


def test_restore_replays_and_detects_a_divergence(env: WebShopEnv):
    rng = random.Random(7)
    env.reset("42")
    actions, texts = [], []
    for _ in range(12):
        action = env.random_action(rng)
        obs = env.step(action)
        actions.append(action)
        texts.append(obs.text)
        if obs.done:
            break
    fresh = WebShopEnv()
    assert fresh.restore("42", actions, texts).text == texts[-1]
    with pytest.raises(RestoreMismatch, match="replay diverged at step 1"):
        fresh.restore("42", actions, ["something else"] + texts[1:])


def test_task_ids_are_goal_indices(env: WebShopEnv):
    with pytest.raises(KeyError, match="task ids are goal indices '0' ... '6909'"):
        env.reset("6910")
    with pytest.raises(KeyError, match="no goal '07'"):
        env.reset("07")


def test_task_table_splits_are_disjoint_and_sized(table):
    assert "webshop" in ENV_NAMES
    sizes = Counter(table["split"])
    assert sizes == {"test": 500, "practice": 999, "train": 5401, "duplicate": 10}
    ids = table["task_id"].astype(int)
    assert sorted(ids[table["split"] == "test"]) == list(range(500))
    assert ids[table["split"] == "practice"].between(500, 1499).all()
    assert ids[table["split"] == "train"].min() >= 1500
    goals = {g.index: g for g in WebShopEnv().catalog.goals}
    texts = {s: {goals[int(t)].instruction_text for t in table.loc[table["split"] == s, "task_id"]}
             for s in ("test", "practice", "train")}
    assert not (texts["test"] & texts["practice"]) and not (texts["test"] & texts["train"])
    assert not (texts["practice"] & texts["train"])
    # the papers' sizes: 10 rounds x 50 training tasks, 100 held-out, 500 evaluation tasks
    assert sizes["train"] >= 500 and sizes["test"] == 500 and sizes["practice"] >= 200
    assert set(table["type"]) == {"purchase"}  # one stratum: select_tasks draws uniformly
    categories = Counter(detail(r)["category"] for _, r in table[table["split"] == "test"].iterrows())
    assert categories == {"fashion": 393, "garden": 57, "beauty": 23, "electronics": 19, "grocery": 8}
    assert (table["source"] == "generated").all()


def test_capped_goals_are_flagged(table):
    """458 goals cap the exact purchase below 1.0 (6 of goals 0-199, as upstream's expert shows)."""
    capped = {int(r["task_id"]) for _, r in table.iterrows() if detail(r)["capped"]}
    assert len(capped) == 458
    expert = {e["goal_index"]: e["final_reward"] for e in golden("transcripts") if e["policy"] == "expert"}
    assert {i for i, r in expert.items() if r < 1.0} == {i for i in capped if i < 200}


def test_registration_make_env_load_tasks_and_config_checks(tmp_path, table):
    path = tmp_path / "webshop.parquet"
    write_table(table, path)
    tasks = load_tasks("webshop", path)
    assert len(select_tasks(tasks, 100, "test", seed=3)) == 100
    env = make_env("webshop", max_steps=30)
    assert isinstance(env, WebShopEnv) and env.max_steps == 30
    cfg = {"webshop": {"root": None}}
    assert env_catalog.allowed_splits("webshop", cfg) == ("train", "practice", "test", "duplicate")
    assert env_catalog.split_size("webshop", "test", cfg)[0] == 500
    assert env_catalog.known_task_types("webshop", cfg)[0] == ("purchase",)
    assert set(env_catalog.env_option_names("webshop")) == {"root", "max_steps", "process"}
    env_catalog.check_task_count("webshop", "test", 500, cfg, "x.tasks", "fix")
    with pytest.raises(ConfigError, match="holds 500"):
        env_catalog.check_task_count("webshop", "test", 501, cfg, "x.tasks", "fix")
    with pytest.raises(ConfigError, match="unknown split 'eval'"):
        env_catalog.check_split("webshop", "eval", cfg, "x.split")


def test_setup_and_env_check(tmp_path, table):
    record = setup_webshop(ENVS_CFG, str(tmp_path / "setup.json"))
    assert json.loads((tmp_path / "setup.json").read_text())["indexed"] == record["indexed"] == 1000
    assert record["index_s"] < 30
    path = tmp_path / "webshop.parquet"
    write_table(table, path)
    check = run_envcheck("webshop", ENVS_CFG, str(path))
    gold = check[check["agent"] == "gold"]
    assert len(gold) == 8 and gold["won"].all()
    assert set(check["agent"]) == {"gold", "random"}


def test_keyword_prefixes(env: WebShopEnv):
    """Upstream's ``<q>``/``<c>`` searches list catalog products; ``<r>`` is seeded per session and
    draw (a replay repeats it); ``<a>`` and a bare ``<c>``, which raise upstream, are no-ops."""
    env.reset("0")
    q = env.step("search[<q> decorative pillows]")
    assert q.info["valid"] and "Total results: " in q.text
    listed = [c.upper() for c in q.info["clickables"] if len(c) == 10 and c.startswith("b")]
    assert listed and all(env.catalog.products[a].query == "decorative pillows" for a in listed)
    first = env.step("search[<r>]").text
    assert env.step("search[<r>]").text != first
    env.reset("0")
    assert env.step("search[<r>]").text == first
    for action in ("search[<a> machine wash]", "search[<c>]"):
        obs = env.step(action)
        assert not obs.info["valid"] and obs.text == first


def test_objects_in_threads_play_as_in_sequence():
    from concurrent.futures import ThreadPoolExecutor

    def play(task: str) -> list[str]:
        env, rng = WebShopEnv(), random.Random(task)
        env.reset(task)
        return [env.step(env.random_action(rng)).text for _ in range(25)]

    tasks = [str(i) for i in range(8)]
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(play, tasks)) == [play(t) for t in tasks]
