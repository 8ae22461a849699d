"""WebShop purchase reward against the recording of upstream's get_reward
(tests/data/webshop/rewards.jsonl.xz: 16,371 (goal, product) pairs, each bought with the goal's
options and with none), upstream's quirks, and the goals whose exact purchase is capped."""

from __future__ import annotations

import pytest

from memtrials.envs.webshop.catalog import load_catalog
from memtrials.envs.webshop.reward import (buy, capped_goals, exact_purchase_reward, normalize_color,
                                           preload_title_nouns, title_nouns, token_set_ratio)
from tests.envs.webshop.golden import golden


def _compare(rows) -> tuple[int, int, float]:
    catalog = load_catalog()
    preload_title_nouns(p.name for p in catalog.products.values())
    n = differ = 0
    largest = 0.0
    for r in rows:
        goal = catalog.goals[r["goal_index"]]
        assert catalog.prices[r["asin"]] == r["price"]
        for variant in ("with_goal_options", "no_options"):
            want = r[variant]
            reward, info = buy(catalog, goal, r["asin"], want["options"])
            n += 1
            if (reward, info) != (want["reward"], want["info"]):
                differ += 1
                largest = max(largest, abs(reward - want["reward"]))
                assert (reward == 1.0) == (want["reward"] == 1.0), (r["goal_index"], r["asin"], variant)
    return n, differ, largest


@pytest.mark.slow
def test_rewards_equal_upstreams_on_every_recorded_purchase():
    # measured: all 32,742 rewards and their components identical (spaCy 3.8.11, en_core_web_sm 3.8.0,
    # RapidFuzz 3.14.6; the recording used spaCy 3.8.18 and thefuzz 0.22.1 on the same RapidFuzz)
    n, differ, largest = _compare(golden("rewards"))
    assert n == 32742 and differ == 0 and largest == 0.0


def test_exact_purchase_is_capped_for_458_goals():
    catalog = load_catalog()
    capped = capped_goals(catalog)
    assert len(capped) == 458
    assert sum(i < 200 for i in capped) == 6 and sum(i < 1000 for i in capped) == 54
    targets = {r["goal_index"]: r["with_goal_options"]["reward"] for r in golden("rewards") if r["is_target"]}
    assert {i for i, reward in targets.items() if reward < 1.0} == {i for i in targets if i in capped}
    assert all(exact_purchase_reward(catalog, catalog.goals[i]) == 1.0 for i in range(50) if i not in capped)


def test_upstreams_quirks_are_kept():
    assert normalize_color("fashion black woman") == "ash"
    assert normalize_color("rectangular") == "tan"
    assert normalize_color("r.brown2070") == "brown"
    assert normalize_color(("color", "black")) == "black"  # a tuple only by element equality
    assert normalize_color(("color", "navy | red")) == ("color", "navy | red")
    assert token_set_ratio("large", ("size", "x-large")) == 100
    assert token_set_ratio("red", ("color", "navy | red")) == 100
    assert token_set_ratio("x-large", ("size", "x-large")) == 100
    assert token_set_ratio("café", "caf") == 100  # thefuzz drops characters 128-255
    assert token_set_ratio("", "") == 0


def test_noun_lists_are_spacys_and_cached():
    titles = [p.name for p in list(load_catalog().products.values())[:40]]
    one_by_one = [title_nouns(t) for t in titles[:20]]
    preload_title_nouns(titles)  # the rest in one batch: the same tagging
    assert [title_nouns(t) for t in titles[:20]] == one_by_one
    assert all(title_nouns(t) is title_nouns(t) for t in titles)
    assert "pillow" in title_nouns(load_catalog().goals[0].name)
