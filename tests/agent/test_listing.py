"""The action listing (memtrials.agent.listing): the seeded sample, the ranked and the best-first listing."""

from __future__ import annotations

import inspect

import pytest

from memtrials.agent import listing as L
from memtrials.agent.actor import ActorSettings, listed_actions

ALF = ("go to cabinet 1", "go to cabinet 2", "go to drawer 1", "go to drawer 2", "go to sidetable 1",
       "go to shelf 1", "go to garbagecan 1", "go to countertop 1", "go to desk 1", "go to bed 1",
       "go to dresser 1", "go to safe 1", "inventory", "look", "examine cabinet 1")
TASK = "Your task is to: put some cd on sidetable."
OBS = "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a sidetable 1, a desk 1."


def test_all_actions_when_under_or_at_the_cap_or_no_cap():
    acts = ALF[:5]
    for listing in ("sample", "ranked"):
        assert listed_actions(acts, 5, "s:1", listing, TASK, OBS) == acts
        assert listed_actions(acts, 9, "s:1", listing, TASK, OBS) == acts
        assert listed_actions(ALF, None, "s:1", listing, TASK, OBS) == ALF
        assert listed_actions(None, 3, "s:1", listing, TASK, OBS) is None


@pytest.mark.parametrize("cap", [1, 3, 7])
def test_ranked_respects_the_cap_is_deterministic_and_in_the_environments_order(cap):
    a = listed_actions(ALF, cap, "s:1", "ranked", TASK, OBS)
    assert len(a) == cap and a == listed_actions(ALF, cap, "s:1", "ranked", TASK, OBS)
    assert list(a) == sorted(a, key=ALF.index)


def test_an_action_naming_the_tasks_object_outranks_unrelated_ones():
    for seed in ("a:1", "b:2", "c:3", "d:4"):
        assert listed_actions(ALF, 1, seed, "ranked", TASK, OBS) == ("go to sidetable 1",)
        two = listed_actions(ALF, 3, seed, "ranked", TASK, OBS)
        assert "go to sidetable 1" in two
        # the observation's objects come next: every pick is the sidetable or an object the observation names
        assert all(any(w in a for w in ("sidetable", "cabinet 1", "desk 1")) for a in two)


def test_the_task_outweighs_the_observation_and_the_verb_does_not_count():
    acts = ("focus on apple", "focus on chair", "focus on table", "look at banana", "move banana to table")
    task = "Your task is to focus on the banana."
    obs = "In it, you see: an apple, a chair, a table."
    top = listed_actions(acts, 2, "s", "ranked", task, obs)
    assert top == ("look at banana", "move banana to table")  # "focus" in the task lifts no focus action
    assert L.relevance(acts, task, obs)[0] == L.relevance(acts, task, obs)[1] > 0  # apple, chair: observation


def test_ties_follow_the_samples_draw_so_an_uninformative_context_gives_the_sample():
    acts = tuple(f"take thing{i} from place{i}" for i in range(60))
    for seed in ("x:1", "y:2", "z:3"):
        assert listed_actions(acts, 10, seed, "ranked", "", "") == listed_actions(acts, 10, seed, "sample")
        assert listed_actions(acts, 10, seed, "ranked", "unrelated words", "nothing here") == \
            listed_actions(acts, 10, seed, "sample")
    differ = {listed_actions(acts, 5, f"s:{t}", "ranked", "", "") for t in range(8)}
    assert len(differ) > 1  # the seed decides among ties
    # one matched action enters; the other four are the sample's first draws
    got = listed_actions(acts, 5, "x:1", "ranked", "bring thing7", "")
    assert "take thing7 from place7" in got
    order = [acts[i] for i in L.sample_order(len(acts), 5, "x:1") if acts[i] != "take thing7 from place7"]
    assert set(got) - {"take thing7 from place7"} == set(order[:4])


def test_sample_order_starts_with_the_samples_own_draw():
    for n, cap, seed in ((100, 10, "s:1"), (30, 29, "t"), (7, 1, "u")):
        order = L.sample_order(n, cap, seed)
        assert sorted(order) == list(range(n))
        acts = tuple(f"a{i}" for i in range(n))
        assert tuple(acts[i] for i in sorted(order[:cap])) == listed_actions(acts, cap, seed, "sample")


def test_the_listing_reads_only_the_admissible_list_task_and_observation():
    params = list(inspect.signature(L.list_actions).parameters)
    assert params == ["admissible", "cap", "seed", "listing", "task", "observation"]
    # same inputs, same output, whatever else changed (no state kept between calls)
    first = L.list_actions(ALF, 4, "s:1", "ranked", TASK, OBS)
    L.list_actions(ALF[::-1], 4, "s:9", "ranked", "other task", "other obs")
    assert L.list_actions(ALF, 4, "s:1", "ranked", TASK, OBS) == first


def test_content_words_drop_stop_words_and_case():
    assert L.content_words("Move the Cup containing red paint in art studio to Table 2") == \
        ["move", "cup", "red", "paint", "art", "studio", "table", "2"]
    assert L.object_words("look around") == set() and L.object_words("go to drawer 6") == {"drawer", "6"}


def test_an_unknown_listing_is_refused():
    with pytest.raises(ValueError, match="unknown action listing 'best'"):
        L.list_actions(ALF, 3, "s", "best")
    with pytest.raises(ValueError, match="listing"):
        ActorSettings(model="m", listing="best")
    assert ActorSettings(model="m", listing="ranked").listing == "ranked"


@pytest.mark.parametrize("cap", [1, 3, 7, 15, None])
def test_best_first_lists_the_ranked_actions_best_match_first(cap):
    """best-first shows exactly the ranked listing's actions, ordered by falling score (the
    sample's draw breaking ties), also when the cap keeps them all."""
    bf = listed_actions(ALF, cap, "s:1", "best-first", TASK, OBS)
    n = len(ALF) if cap is None else cap
    if cap is not None and cap < len(ALF):
        assert set(bf) == set(listed_actions(ALF, cap, "s:1", "ranked", TASK, OBS))
    else:
        assert set(bf) == set(ALF)
    assert len(bf) == n and bf == listed_actions(ALF, cap, "s:1", "best-first", TASK, OBS)
    scores = dict(zip(ALF, L.relevance(ALF, TASK, OBS)))
    assert [scores[a] for a in bf] == sorted((scores[a] for a in bf), reverse=True)
    assert bf[0] == "go to sidetable 1"  # the task's receptacle, first whatever the environment's order


def test_best_first_reorders_a_listing_that_fits_and_keeps_ties_in_the_samples_draw():
    acts = ("inventory", "look", "go to desk 1", "go to sidetable 1")
    bf = listed_actions(acts, 10, "s:2", "best-first", TASK, OBS)
    assert bf[0] == "go to sidetable 1" and set(bf) == set(acts)
    scores = L.relevance(acts, TASK, OBS)
    zero = [a for a, sc in zip(acts, scores) if sc == 0]
    draw = [acts[i] for i in L.sample_order(len(acts), len(acts), "s:2")]
    assert [a for a in bf if a in zero] == [a for a in draw if a in zero]
    assert listed_actions(acts, 10, "s:3", "best-first", "", "") == tuple(draw[:0]) + tuple(
        acts[i] for i in L.sample_order(len(acts), len(acts), "s:3"))
