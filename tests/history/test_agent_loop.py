"""The actor loop on the loopback endpoint and real environments (no mocks, no network)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest

from memtrials.agent.actor import ActorSettings, listed_actions
from memtrials.agent.parse import parse_action
from memtrials.llm import read_records
from memtrials.seeds import seed_of
from memtrials.studies.history.design import actor_settings
from memtrials.studies.history.rollouts import rollout_cell
from memtrials.testing import Faults

from .helpers import gold_policy, repeat_policy

PROMPTS = str(Path(__file__).resolve().parents[2] / "config" / "prompts" / "actor")
SW_TASKS = ["find-non-living-thing:0", "lifespan-longest-lived:0"]


@pytest.fixture(scope="module")
def sw_gold(sw_engines):
    env = sw_engines[0]
    gold = {}
    for t in SW_TASKS:
        actions = env.gold_actions(t)
        env.reset(t)
        gold[env.task_description()] = actions
    return gold


def sw_factory():
    from memtrials.envs.scienceworld.env import ScienceWorldEnv

    return ScienceWorldEnv()


def run(cfg, tmp_path, condition, settings, tasks=SW_TASKS, in_flight=2, tag="a", make=sw_factory):
    out = tmp_path / tag
    df = asyncio.run(rollout_cell(
        cfg, model="loop", env="scienceworld", condition=condition, tasks=tasks,
        seeds=[seed_of(0, "scienceworld", t) for t in tasks], settings=settings, actor_prompts_dir=PROMPTS,
        in_flight=in_flight, out_episodes=str(out / "ep.parquet"), out_steps=str(out / "steps.parquet"),
        out_calls=str(out / "calls.parquet"), make_env=make))
    return df, pd.read_parquet(out / "steps.parquet"), read_records(out / "calls.parquet").to_pandas()


@pytest.mark.slow
def test_gold_policy_wins_scienceworld_and_every_step_is_recorded(loopback, make_config, tmp_path, sw_gold, sw_make):
    srv = loopback(policy=gold_policy(sw_gold), faults=Faults(latency_s=0.3))
    cfg = make_config(srv)
    s = actor_settings("loop", "raw", {"mode": "choice", "max_actions": 30, "max_output_tokens": 64})
    eps, steps, calls = run(cfg, tmp_path, "raw", s, make=sw_make())
    assert list(eps["task_id"]) == SW_TASKS and eps["won"].all()
    assert (eps["termination"] == "won").all()
    gold_len = {t: len(a) for t, a in zip(SW_TASKS, sw_gold.values())}
    # the gold path wins by its end (ScienceWorld may complete a task before its last gold action)
    assert all(1 <= n <= gold_len[t] for t, n in zip(eps["task_id"], eps["n_steps"]))
    assert len(steps) == eps["n_steps"].sum()
    # every step links to a recorded actor call, in step order, with its prompt facts
    assert set(steps["call_id"]) <= set(calls["call_id"])
    assert (calls["purpose"] == "actor").all()
    for _, g in steps.groupby("task_id"):
        assert list(g["step"]) == list(range(1, len(g) + 1))
        assert (g["history_tokens"].diff().dropna() > 0).all()  # the raw history grows
        assert g["won"].iloc[-1] and not g["won"].iloc[:-1].any()
    assert (steps["parse_status"] == "ok").all() and (steps["constraint"] == "json_enum").all()
    assert steps["prompt_digest"].str.len().eq(64).all()
    # two episodes in flight at once, through the client
    assert srv.stats.max_in_flight == 2


@pytest.mark.slow
def test_experience_reviews_follow_non_terminal_transitions_and_stay_in_later_prompts(
        loopback, make_config, tmp_path, sw_gold, sw_make):
    review = '{"decision":"CALIBRATE","experience":"The door is now open."}'
    srv = loopback(policy=gold_policy(sw_gold, review=review))
    cfg = make_config(srv)
    s = actor_settings("loop", "experience", {"mode": "choice", "max_actions": 30, "max_output_tokens": 64})
    eps, steps, calls = run(cfg, tmp_path, "experience", s, tasks=SW_TASKS[:1], in_flight=1, make=sw_make())
    n = int(eps["n_steps"].iloc[0])
    assert eps["won"].all()
    # one review per non-terminal transition: none after the winning (terminal) action
    assert int(eps["n_reviews"].iloc[0]) == n - 1 == int(eps["n_experiences"].iloc[0])
    assert pd.isna(steps["review_decision"].iloc[-1])
    reviews = calls[calls["purpose"] == "review"]
    assert len(reviews) == n - 1
    # the review input excludes earlier experiences (G.2), the actor prompt keeps them beside their step
    last_review = json.loads(reviews.sort_values("messages", key=lambda m: m.str.len()).iloc[-1]["messages"])
    assert "Experience derived" not in last_review[1]["content"]
    actor_calls = calls[calls["purpose"] == "actor"]
    last_prompt = json.loads(actor_calls.set_index("call_id").loc[steps["call_id"].iloc[-1], "messages"])
    text = last_prompt[-1]["content"]
    assert text.count("[Experience derived from Action") == n - 1
    assert text.index("Action 1: ") < text.index("[Experience derived from Action 1 ") < text.index("Observation 2: ")


@pytest.mark.slow
def test_inadmissible_actions_are_recorded_and_count_as_steps(loopback, make_config, tmp_path, sw_make):
    srv = loopback(policy=repeat_policy("dance with the thermometer"))
    cfg = make_config(srv)
    s = actor_settings("loop", "raw", {"mode": "react", "max_actions": 4, "max_output_tokens": 64})
    eps, steps, _ = run(cfg, tmp_path, "raw", s, tasks=SW_TASKS[:1], in_flight=1, make=sw_make())
    assert list(eps["n_steps"]) == [4] and list(eps["termination"]) == ["budget"]
    assert (steps["parse_status"] == "inadmissible").all() and int(eps["n_inadmissible"].iloc[0]) == 4
    assert not eps["won"].any()


def test_parse_action_rules():
    adm = ("open door", "look around")
    assert parse_action("<think>x</think><action>Open  Door</action>", adm) == parse_action("open door", adm)
    assert parse_action("<action>open door</action>", adm).status == "ok"
    assert parse_action("<action>fly</action>", adm).status == "inadmissible"
    p = parse_action("I think\nwe should\nopen it", adm)
    assert p.status == "unparsable" and p.action == "I think"
    assert parse_action("look around", adm, "choice").action == "look around"
    assert parse_action("<action>print(1)\nprint(2)</action>", None).action == "print(1)\nprint(2)"
    assert parse_action("<action>```python\nprint(1)\n```</action>", None).action == "print(1)"


def test_listed_actions_cap_is_seeded_and_order_preserving():
    acts = tuple(f"a{i}" for i in range(100))
    a = listed_actions(acts, 10, "s:1")
    assert a == listed_actions(acts, 10, "s:1") and len(a) == 10
    assert list(a) == sorted(a, key=acts.index)
    assert listed_actions(acts, None, "s") == acts and listed_actions(None, 5, "s") is None


def test_settings_reject_bad_values():
    with pytest.raises(ValueError, match="max_actions"):
        ActorSettings(model="m", max_actions=0)
    with pytest.raises(ValueError, match="unknown key"):
        actor_settings("m", "raw", {"max_step": 3})
    with pytest.raises(ValueError, match="unknown history condition"):
        actor_settings("m", "shuffled", {})


@pytest.mark.slow
def test_chat_format_with_causal_labels_and_memory_ids(loopback, make_config, tmp_path, sw_gold, sw_make):
    from memtrials.memory.base import Lesson, MemoryBlock, Served, StepContext

    class PerStep:  # a MemoryView (memtrials.memory.base) whose block depends on the step
        step_columns: tuple = ()
        episode_columns: tuple = ()
        columns: dict = {}

        async def for_episode(self, client, task):
            return self

        def at_step(self, ctx: StepContext) -> Served:
            return Served(MemoryBlock((Lesson(f"L{ctx.step}", f"lesson for step {ctx.step}"), Lesson("L0", "always"))))

    memory = PerStep()

    srv = loopback(policy=gold_policy(sw_gold))
    cfg = make_config(srv)
    s = actor_settings("loop", "causal-chat", {"mode": "choice", "max_actions": 30, "max_output_tokens": 64})
    out = tmp_path / "chat"
    eps = asyncio.run(rollout_cell(
        cfg, model="loop", env="scienceworld", condition="causal-chat", tasks=SW_TASKS[:1],
        seeds=[1], settings=s, actor_prompts_dir=PROMPTS, in_flight=1, out_episodes=str(out / "ep.parquet"),
        out_steps=str(out / "steps.parquet"), out_calls=str(out / "calls.parquet"), make_env=sw_make(),
        memory=memory))
    assert eps["won"].all()
    steps = pd.read_parquet(out / "steps.parquet")
    assert [json.loads(m) for m in steps["memory_ids"]] == [[f"L{t}", "L0"] for t in steps["step"]]
    calls = read_records(out / "calls.parquet").to_pandas().set_index("call_id")
    msgs = json.loads(calls.loc[steps["call_id"].iloc[-1], "messages"])
    n = len(steps) - 1  # history entries before the last action
    assert [m["role"] for m in msgs] == ["system"] + ["user", "assistant"] * n + ["user"]
    assert msgs[1]["content"].startswith("Initial Observation 1: ")
    assert all(m["content"].startswith(f"Outcome of Action {i}: ")
               for i, m in enumerate(msgs[3:-1:2], start=1))
    assert msgs[-1]["content"].startswith(f"Current observation (Outcome of Action {n}): ")
    assert "lesson for step" in msgs[0]["content"]
    assert [m["content"] for m in msgs[2:-1:2]] == list(steps["action"].iloc[:-1])


def test_context_errors_are_told_apart_from_outages():
    from memtrials.agent.actor import is_context_error
    from memtrials.llm import CallFailed

    assert is_context_error(CallFailed("smollm2 (x): the endpoint refused the request with HTTP 400: the request "
                                       "exceeds the available context size, try increasing it."))
    assert not is_context_error(CallFailed("smollm2 (x): call failed after 9 attempts; last error: APIConnectionError"))
    assert not is_context_error(CallFailed("x: the endpoint refused the request with HTTP 401: bad key"))


@pytest.mark.slow
@pytest.mark.parametrize("view", ["shuffle_all", "shuffle_old"])
def test_both_shuffle_modes_through_the_actor_loop(loopback, make_config, tmp_path, sw_make, view):
    """history.shuffle reaches the prompts: per_step redraws, per_episode extends one permutation."""
    from memtrials.agent import views as V

    srv = loopback(policy={"random": 3})
    cfg = make_config(srv)
    fixed = 3 if view == "shuffle_old" else 0
    shown = {}
    for mode in ("per_step", "per_episode"):
        s = actor_settings("loop", view, {"mode": "choice", "max_actions": 9, "max_output_tokens": 32}, shuffle=mode)
        _, steps, calls = run(cfg, tmp_path, view, s, tasks=SW_TASKS[:1], in_flight=1, tag=mode, make=sw_make())
        steps = steps.sort_values("step")
        seed = seed_of(0, "scienceworld", SW_TASKS[0])
        perms = [tuple(json.loads(p)) for p in steps["permutation"]]
        assert perms == [V.draw(len(p), seed, mode) if not fixed else
                         V.draw(max(0, len(p) - fixed), seed, mode) + tuple(range(max(0, len(p) - fixed), len(p)))
                         for p in perms]
        assert [len(p) for p in perms] == list(range(len(perms)))
        # the prompt shows the recorded arrangement
        last = json.loads(calls.set_index("call_id").loc[steps["call_id"].iloc[-1], "messages"])[-1]["content"]
        acts = list(steps["action"])[:-1]
        for i, j in enumerate(perms[-1]):
            assert f"Action {i + 1}: '{acts[j]}']" in last
        shown[mode] = perms
    olds = {m: [p[:max(0, len(p) - fixed)] for p in ps] for m, ps in shown.items()}
    grown = [sum(x != y for x, y in zip(a, b)) for a, b in zip(olds["per_episode"], olds["per_episode"][1:])]
    redrawn = [sum(x != y for x, y in zip(a, b)) for a, b in zip(olds["per_step"], olds["per_step"][1:])]
    assert max(grown) <= 1 and sum(redrawn) > sum(grown)
