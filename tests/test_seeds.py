"""The seeded draws, pinned: every seed function gives the numbers it gave before the one
seed rule (memtrials.seeds) replaced its copies.  The literal values were computed on the
code before that change (e8efc6e); a change here changes task orders, shuffles, action
listings, prompts and cache keys, hence every output."""

from __future__ import annotations

import pandas as pd

from memtrials.agent import listing, views
from memtrials.stats.bandit import rng_for
from memtrials.seeds import order_key, seed64, seed_of
from memtrials.studies.antipersist.design import training_order
from memtrials.studies.history.calibrator.contexts import Context, sample_contexts
from memtrials.studies.history.continuation import select_sources
from memtrials.studies.playbook.design import growth_order


def test_episode_seeds_of_the_history_study():  # was history.design.episode_seed(base, env, task)
    assert [seed_of(0, "scienceworld", "boil-0"), seed_of(7, "alfworld", "pick_and_place-12"),
            seed_of(3, "appworld", "a1b2c3_1")] == [806820413, 1668333423, 1113824113]


def test_seeds_of_antipersist_and_playbook():  # were antipersist.design.seed_of, playbook.design.seed_of
    assert [seed_of(0, "seed", 0), seed_of(123, "train", 2, 5, "t-9"), seed_of(5)] == [
        1468776265, 591014424, 1865224830]
    assert [seed_of(0, "eval", "alfworld", "t1", 0), seed_of(11, "growth-order", "appworld", 1, 2),
            seed_of("x")] == [851542943, 156833297, 762385986]


def test_orders_drawn_from_seeds():
    assert growth_order([f"t{i}" for i in range(8)], 11, "alfworld", 0, 1) == [
        "t4", "t0", "t3", "t6", "t5", "t7", "t2", "t1"]
    assert training_order(["a", "b", "c", "d", "e"], 3, 3, 42) == [
        ["b", "a", "d"], ["c", "e", "c"], ["e", "b", "d"]]


def test_generators_seeded_by_a_hash():
    r = rng_for(7, "task-3")
    assert r.integers(0, 2**31, size=3).tolist() == [257882221, 1674964995, 1291199885]
    assert rng_for(0, "é").random() == 0.748526777163402
    assert listing.sample_order(10, 4, "seed-a") == [6, 8, 9, 4, 7, 1, 0, 5, 3, 2]
    assert listing.sampled(tuple("abcdefgh"), 3, "s:1:2") == ("b", "e", "f")
    assert views.permutation(7, 3) == (5, 2, 6, 0, 3, 1, 4)
    assert views.permutation(5, "ep-1:2") == (2, 0, 4, 1, 3)
    assert views.growing_permutation(7, 3) == (4, 0, 1, 2, 3, 6, 5)
    assert views.growing_permutation(6, "x") == (5, 2, 4, 3, 1, 0)


def test_hash_orders_of_sources_and_contexts():
    ids = [f"c/t{i}" for i in range(8)]
    episodes = pd.DataFrame({"episode_id": ids, "won": [False] * 8, "n_steps": [3] * 8,
                             "termination": ["budget"] * 8, "task_id": ids, "seed": range(8),
                             "initial_observation": "o", "task": "t"})
    steps = pd.DataFrame([{"episode_id": e, "step": s, "action": "a", "replay_action": "a", "observation": "o"}
                          for e in ids for s in (1, 2, 3)])
    assert [s.episode_id for s in select_sources(episodes, steps, 5, 9)] == [
        "c/t4", "c/t2", "c/t5", "c/t0", "c/t1"]
    # was calibrator.contexts._key(seed, *parts), the order of groups and contexts
    assert order_key(0, "m", "env", 3) == "e01fd5b58bc3608fcb5eff6c22ecb0096776c59ae4ffb9d81879a5c957c7c936"
    groups = {(m, e): [Context(f"{m}/{e}/t{i}/{s}", m, e, f"t{i}", f"x/t{i}", "task", s, (), "a", "o", None)
                       for i in range(3) for s in (1, 2)] for m in ("m1", "m2") for e in ("alfworld", "scienceworld")}
    assert [c.context_id for c in sample_contexts(groups, 7, 5)] == [
        "m1/alfworld/t1/1", "m1/scienceworld/t1/2", "m1/scienceworld/t2/2", "m2/alfworld/t1/2", "m2/alfworld/t2/1",
        "m2/scienceworld/t0/2", "m2/scienceworld/t2/2"]


def test_the_rule_itself():
    # the bytes hashed: parts joined by ":" (the bandit: "\x1f"); 8 bytes for a generator
    assert seed64("hindsight-shuffle", 3, 7) == 214531356278387646
    assert seed64(7, "task-3", sep="\x1f") == 1947671239408754307
