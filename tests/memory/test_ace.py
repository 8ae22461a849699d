"""ACE's playbook on the loopback endpoint: stable ids, counted tags, merged near-duplicates,
invalid answers recorded and ignored, feedback modes, serving, snapshots, and a real
ScienceWorld stream through the runner."""

from __future__ import annotations

import asyncio
import json
import re

import numpy as np
import pandas as pd
import pytest

from memtrials.memory.ace import ACEPlaybook, greedy_groups, grew_by, growth_stops
from memtrials.memory.ace_feedback import feedback_text, served_ids, unit_tests
from memtrials.memory.snapshot import read_snapshot, restore, write_snapshot
from memtrials.testing.policies import first_admissible

from .helpers import MEMORY_PROMPTS, calls, config, episode, update

REFLECTOR = "You review one finished attempt"
CURATOR = "You maintain a playbook"
NOTHING = json.dumps({"analysis": "Nothing new.", "tags": []})


class Scripted:
    """Loopback policy: Reflector answers by task (first line of the prompt) or by a function
    of the prompt, Curator answers
    in call order (one call per batch), the actor the first admissible action."""

    def __init__(self, reflect=None, curate=()):
        self.reflect = reflect or {}
        self.curate = list(curate)
        self.n_curator = 0

    def __call__(self, body):
        msgs = body["messages"]
        system, user = msgs[0]["content"], msgs[-1]["content"]
        if system.startswith(REFLECTOR):
            if callable(self.reflect):
                return self.reflect(user)
            return self.reflect.get(user.splitlines()[0].removeprefix("Task: "), NOTHING)
        if system.startswith(CURATOR):
            self.n_curator += 1
            r = self.curate[min(self.n_curator, len(self.curate)) - 1] if self.curate else None
            return (r(user) if callable(r) else r) or json.dumps({"reasoning": "", "operations": []})
        return first_admissible(body)


def adds(*ops, reasoning="r"):
    return json.dumps({"reasoning": reasoning, "operations": [
        {"type": "ADD", "section": s, "content": c} for s, c in ops]})


def lesson(i, text, section="str", helpful=0, harmful=0, neutral=0):
    return {"id": i, "section": section, "text": text, "helpful": helpful, "harmful": harmful, "neutral": neutral,
            "batch": 0, "call_id": "c0"}


def playbook(embedder="emb", **kw):
    return ACEPlaybook("loop", "loop", embedder, MEMORY_PROMPTS, token_budget=500, **kw)


def loaded(lessons, counter=None, **kw):
    m = playbook(**kw)
    m.load({"lessons": lessons, "counter": counter if counter is not None else len(lessons), "batches": 1,
            "rejected": [], "history": []})
    return m


def test_lessons_are_appended_with_stable_ids_across_batches(loopback, tmp_path):
    policy = Scripted(curate=[
        adds(("str", "Read the whole task before acting."), ("APIs to use", "List the apps first."),
             ("Misc Stuff", "Keep notes."), ("heu", "   ")),
        adds(("Problem-solving heuristics", "Try the simplest action first.")),
    ])
    srv = loopback(policy=policy, embed_dim=64)
    cfg = config(tmp_path, srv)
    m = playbook()
    update(cfg, m, [[episode("e1", "boil water"), episode("e2", "find a key")]], tmp_path / "a.parquet")
    first = [dict(x) for x in m.lessons]
    assert [x["id"] for x in first] == ["str-00001", "api-00002", "oth-00003"]
    assert [x["text"] for x in first] == ["Read the whole task before acting.", "List the apps first.", "Keep notes."]
    cur = m.history[0]["curator"]
    assert cur["valid"] and cur["unknown_sections"] == ["Misc Stuff"] and cur["empty"] == 1
    update(cfg, m, [[episode("e3", "boil water", served=m.block().ids)]], tmp_path / "b.parquet")
    assert [x["id"] for x in m.lessons] == ["str-00001", "api-00002", "oth-00003", "heu-00004"]
    assert m.lessons[:3] == first  # appended; nothing before it changed (no tags were given)
    assert m.batches == 2 and m.counter == 4 and m.rejected == []
    assert [x["batch"] for x in m.lessons] == [0, 0, 0, 1]
    # the Curator saw the playbook with its counts and the budget; the Reflector the lessons without counts
    c = calls(tmp_path / "b.parquet")
    cur_msg = next(r for r in c if r["purpose"] == "ace_curator")["messages"][-1]["content"]
    assert "[api-00002] (api) helpful=0 harmful=0 :: List the apps first." in cur_msg and "of a budget of 500" in cur_msg
    ref_msg = next(r for r in c if r["purpose"] == "ace_reflector")["messages"][-1]["content"]
    assert "[str-00001] Read the whole task before acting." in ref_msg and "helpful=" not in ref_msg


def test_tags_counted_once_per_batch_only_for_served_ids(loopback, tmp_path):
    def tags(*pairs):
        return json.dumps({"analysis": "The agent opened the door.", "tags": [{"id": i, "tag": t} for i, t in pairs]})

    policy = Scripted(reflect={
        "task one": tags(("str-00001", "helpful"), ("api-00002", "harmful"), ("str-00003", "helpful"),
                         ("str-00001", "neutral")),
        "task two": tags(("str-00001", "helpful"), ("api-00002", "neutral"), ("zzz-99999", "harmful")),
        "task three": tags(("str-00003", "neutral"), ("str-00003", "harmful")),
    })
    srv = loopback(policy=policy, embed_dim=64)
    m = loaded([lesson("str-00001", "Open the door."), lesson("api-00002", "Call the API.", "api"),
                lesson("str-00003", "Look around.", helpful=1)])
    update(config(tmp_path, srv), m, [[episode("e1", "task one", served=["str-00001", "api-00002"]),
                                       episode("e2", "task two", served=["str-00001"]),
                                       episode("e3", "task three", served=["str-00001", "api-00002", "str-00003"])]],
           tmp_path / "c.parquet")
    got = {x["id"]: (x["helpful"], x["harmful"], x["neutral"]) for x in m.lessons}
    assert got == {"str-00001": (2, 0, 0), "api-00002": (0, 1, 0), "str-00003": (1, 0, 1)}
    refl = {r["episode_id"]: r for r in m.history[0]["reflections"]}
    assert refl["e1"]["ignored"] == ["str-00003", "str-00001"]  # not served to e1; a repeat
    assert refl["e2"]["ignored"] == ["api-00002", "zzz-99999"]
    assert refl["e3"]["ignored"] == ["str-00003"] and refl["e3"]["tags"] == {"helpful": 0, "harmful": 0, "neutral": 1}
    assert refl["e1"]["tags"] == {"helpful": 1, "harmful": 1, "neutral": 0}
    # batched: the one Curator call already sees every reflection's tags applied
    c = calls(tmp_path / "c.parquet")
    cur = [r for r in c if r["purpose"] == "ace_curator"]
    assert len(cur) == 1 and "[str-00001] (str) helpful=2 harmful=0" in cur[0]["messages"][-1]["content"]
    assert cur[0]["messages"][-1]["content"].count("The agent opened the door.") == 3
    assert sum(r["purpose"] == "ace_reflector" for r in c) == 3


def test_near_duplicates_merge_into_the_first_id_with_counts_summed(loopback, tmp_path):
    policy = Scripted(curate=[adds(("str", "Check the fridge."), ("ver", "Verify the answer before ending."),
                                   ("str", "  Check   the fridge. "))])
    srv = loopback(policy=policy, embed_dim=64)
    m = loaded([lesson("str-00001", "Check the fridge.", helpful=2, harmful=1),
                lesson("str-00002", "Read the task.", helpful=1),
                lesson("mis-00003", "Check the fridge.", "mis", helpful=3, neutral=2)])  # a planted duplicate
    update(config(tmp_path, srv), m, [[episode("e1", "cool an apple")]], tmp_path / "d.parquet")
    assert [x["id"] for x in m.lessons] == ["str-00001", "str-00002", "ver-00005"]
    head = m.lessons[0]
    assert (head["text"], head["section"]) == ("Check the fridge.", "str")  # the first lesson's text, no merge call
    assert (head["helpful"], head["harmful"], head["neutral"]) == (5, 1, 2)
    merges = m.history[0]["merges"]
    assert merges == [{"kept": "str-00001", "absorbed": ["mis-00003", "str-00004", "str-00006"],
                       "cosine": [1.0, 1.0, 1.0]}]
    assert m.counter == 6  # absorbed ids are never reused
    c = calls(tmp_path / "d.parquet")
    assert {r["purpose"] for r in c} == {"ace_reflector", "ace_curator", "ace_dedup"}
    # a batch that adds nothing embeds nothing; merging off (embedder None) keeps duplicates
    srv2 = loopback(policy=Scripted(curate=[adds(("str", "Read the task."))]), embed_dim=64)
    off = loaded([lesson("str-00001", "Read the task.")], embedder=None)
    update(config(tmp_path / "off", srv2), off, [[episode("e1", "x")]], tmp_path / "e.parquet")
    assert [x["id"] for x in off.lessons] == ["str-00001", "str-00002"]
    assert "ace_dedup" not in {r["purpose"] for r in calls(tmp_path / "e.parquet")}


def test_greedy_groups_use_the_threshold_and_the_head_of_each_group():
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=32), rng.normal(size=32)
    b -= a * (a @ b) / (a @ a)  # orthogonal to a

    def at(cos):  # a vector at cosine `cos` with a
        return cos * a / np.linalg.norm(a) + np.sqrt(1 - cos ** 2) * b / np.linalg.norm(b)

    from memtrials.memory.ace import cosines

    vecs = [a, at(0.95), at(0.85), b, at(0.90), 3.0 * a]
    assert greedy_groups(cosines(vecs), 0.90) == [[0, 1, 4, 5], [2], [3]]
    # (all but b lie in one plane: at 0.96 the vector at 18 degrees heads those at 26 and 32)
    assert greedy_groups(cosines(vecs), 0.96) == [[0, 5], [1, 2, 4], [3]]
    assert greedy_groups(cosines(vecs), 0.999) == [[0, 5], [1], [2], [3], [4]]
    # the head decides: x~y and y~z but not x~z gives {x, y}, {z}
    x, y, z = at(1.0), at(0.93), at(0.72)
    sims = cosines([x, y, z])
    assert sims[1, 2] > 0.9 > sims[0, 2]
    assert greedy_groups(sims, 0.90) == [[0, 1], [2]]
    assert greedy_groups(np.zeros((0, 0)), 0.9) == []


def test_invalid_answers_change_nothing_and_are_recorded(loopback, tmp_path):
    policy = Scripted(reflect={"task one": "I think it went fine.",
                               "task two": json.dumps({"analysis": "ok", "tags": [{"id": "str-00001", "tag": "great"}]}),
                               "task three": json.dumps({"analysis": "Door first.",
                                                         "tags": [{"id": "str-00001", "tag": "helpful"}]})},
                      curate=[json.dumps({"reasoning": "r", "operations": "ADD a lesson"})])
    srv = loopback(policy=policy, embed_dim=64)
    m = loaded([lesson("str-00001", "Open the door.")])
    before = [dict(x) for x in m.lessons]
    eps = [episode(f"e{k}", t, served=["str-00001"]) for k, t in enumerate(["task one", "task two", "task three"])]
    update(config(tmp_path, srv), m, [eps], tmp_path / "f.parquet")
    assert m.lessons[0]["helpful"] == 1 and {k: m.lessons[0][k] for k in ("harmful", "neutral")} == \
        {"harmful": 0, "neutral": 0}  # only the valid reflection's tag
    assert [x["id"] for x in m.lessons] == ["str-00001"] and m.counter == 1  # the invalid curation added nothing
    c = {r["call_id"]: r for r in calls(tmp_path / "f.parquet")}
    rej = m.rejected
    assert [(r["role"], r["episode_id"]) for r in rej] == [("reflector", "e0"), ("reflector", "e1"), ("curator", None)]
    assert all(r["call_id"] in c and r["error"] and r["batch"] == 1 for r in rej)  # loaded after batch 0
    assert c[rej[1]["call_id"]]["purpose"] == "ace_reflector" and "tag" in rej[1]["error"]
    assert m.history[0]["curator"]["valid"] is False
    # every Reflector answer invalid: no Curator call at all, nothing changes but the records
    srv2 = loopback(policy=Scripted(reflect={"task one": "no json"}), embed_dim=64)
    m2 = loaded(before)
    update(config(tmp_path / "2", srv2), m2, [[episode("e9", "task one", served=["str-00001"])]], tmp_path / "g.parquet")
    assert m2.lessons == before and m2.history[0]["curator"] is None
    assert [r["purpose"] for r in calls(tmp_path / "g.parquet")] == ["ace_reflector"]


TESTS = [{"requirement": "assert the song was liked", "passed": True, "trace": ""},
         {"requirement": "assert no other song was liked", "passed": False, "trace": "AssertionError:  3 != 1"}]


def test_feedback_modes_and_served_ids():
    ep = episode("e1", "like a song", won=False, score=50.0, tests=TESTS, served=["a-1", "b-2"])
    ep.steps[0]["memory_ids"] = json.dumps(["b-2", "c-3"])
    assert served_ids(ep) == ["b-2", "c-3", "a-1"]
    assert unit_tests(ep) == TESTS
    assert feedback_text(ep, "pass_fail") == "The task was not completed."
    per_test = feedback_text(ep, "unit_tests")
    assert per_test.splitlines() == ["The task was not completed. Unit tests: 1 of 2 passed.",
                                     "- PASS: assert the song was liked",
                                     "- FAIL: assert no other song was liked (AssertionError: 3 != 1)"]
    ep2 = episode("e2", "x", won=True)
    ep2.summary["tests"] = TESTS[:1]  # a summary may carry them too
    assert feedback_text(ep2, "unit_tests").startswith("The task was completed successfully. Unit tests: 1 of 1")
    with pytest.raises(ValueError, match=r"episode 'e3' carries no unit-test results.*use feedback 'pass_fail'"):
        feedback_text(episode("e3", "x"), "unit_tests")
    with pytest.raises(ValueError, match="feedback must be one of"):
        playbook(feedback="per_test")


def test_unit_test_feedback_reaches_the_reflector(loopback, tmp_path):
    srv = loopback(policy=Scripted(), embed_dim=64)
    m = playbook(feedback="unit_tests")
    update(config(tmp_path, srv), m, [[episode("e1", "like a song", tests=TESTS)]], tmp_path / "h.parquet")
    msg = next(r for r in calls(tmp_path / "h.parquet") if r["purpose"] == "ace_reflector")["messages"][-1]["content"]
    assert "- FAIL: assert no other song was liked" in msg and "1 of 2 passed" in msg
    srv2 = loopback(policy=Scripted(), embed_dim=64)
    m2 = playbook(feedback="pass_fail")
    update(config(tmp_path / "pf", srv2), m2, [[episode("e1", "like a song", tests=TESTS)]], tmp_path / "i.parquet")
    msg2 = next(r for r in calls(tmp_path / "i.parquet") if r["purpose"] == "ace_reflector")["messages"][-1]["content"]
    assert "The task was not completed." in msg2 and "assert" not in msg2 and "passed" not in msg2


def test_frozen_serves_the_whole_playbook_without_tags():
    m = loaded([lesson("str-00001", "Open the door.", helpful=4), lesson("api-00002", "Call the API.", "api", harmful=2),
                lesson("str-00003", "Look around.")])
    view = m.frozen()
    assert view.block.ids == ("str-00001", "api-00002", "str-00003")
    text = view.block.render()
    assert text == "Playbook:\n- Open the door.\n- Call the API.\n- Look around.\n"
    m.lessons.append(lesson("str-00004", "Later."))
    assert view.block.ids == ("str-00001", "api-00002", "str-00003")  # frozen
    g = loaded(m.lessons[:3], grouped=True).frozen().block
    assert g.ids == ("str-00001", "str-00003", "api-00002")
    assert g.render() == ("Playbook:\n## strategies and hard rules\n- Open the door.\n- Look around.\n"
                          "## apis to use\n- Call the API.\n")
    assert playbook().frozen().block.render() == ""
    rows = m.rows()
    assert rows[0] == {"id": "str-00001", "section": "str", "text": "Open the door.", "helpful": 4, "harmful": 0,
                       "neutral": 0, "tokens": 4}
    assert m.tokens() == 4 + 4 + 3 + 2


def test_growth_rule():
    def st(n):
        return {"lessons": [{}] * n}
    assert grew_by(st(10), st(11)) == pytest.approx(0.1)
    assert growth_stops(st(10), st(10)) and growth_stops(st(20), st(21)) and not growth_stops(st(10), st(11))
    assert grew_by(st(0), st(3)) == float("inf") and not growth_stops(st(0), st(3))
    assert grew_by(st(0), st(0)) == 0.0 and growth_stops(st(0), st(0))
    assert grew_by(st(4), st(3)) == pytest.approx(-0.25)  # merges can shrink a pass


def test_snapshot_round_trip(loopback, tmp_path):
    srv = loopback(policy=Scripted(curate=[adds(("str", "Read the task."), ("str", "Read the task."))]), embed_dim=64)
    a = playbook()
    update(config(tmp_path, srv), a, [[episode("e1", "x"), episode("e2", "y")]], tmp_path / "j.parquet")
    a.rejected.append({"batch": 0, "role": "curator", "call_id": "c", "episode_id": None, "error": "ü"})
    snap = write_snapshot(tmp_path / "a.json", a, round=1)
    b = playbook()
    restore(b, tmp_path / "a.json")
    assert b.state() == a.state() and b.block() == a.block()
    assert write_snapshot(tmp_path / "b.json", b, round=1)["digest"] == snap["digest"]
    assert read_snapshot(tmp_path / "b.json", "ace_playbook")["state"]["history"][0]["merges"][0]["kept"] == "str-00001"
    assert b.counter == 2 and [x["id"] for x in b.lessons] == ["str-00001"]


@pytest.mark.slow
def test_stream_each_batch_sees_the_playbook_as_it_stood_at_its_start(loopback, tmp_path):
    """Real ScienceWorld episodes through Runner.stream (B = 2, 4 episodes, 2 actions)."""
    from memtrials.agent.prompts import ActorPrompts
    from memtrials.agent.runner import Runner, write_episodes
    from memtrials.envs.pool import EnvPool, env_factory
    from memtrials.llm import open_client

    from tests.agent.stream_cell import PROMPTS, TASKS, specs

    def tag_all(user):  # every served lesson helpful
        ids = re.findall(r"^\[([a-z]{3}-\d{5})\]", user, re.MULTILINE)
        return json.dumps({"analysis": f"Reviewed {len(ids)} lessons.", "tags": [{"id": i, "tag": "helpful"} for i in ids]})

    def curate(user):  # one lesson per batch, named after the playbook's size
        n = int(re.search(r"Playbook \((\d+) lessons", user).group(1))
        return adds(("str", f"Lesson written when the playbook held {n}."))

    srv = loopback(policy=Scripted(reflect=tag_all, curate=[curate]), embed_dim=64)
    cfg = config(tmp_path, srv)
    memory = playbook()
    states = []

    async def main():
        async with EnvPool(env_factory("scienceworld"), 2) as pool, \
                open_client(cfg, "tests/ace-stream", tmp_path / "calls.parquet") as client:
            runner = Runner(client, pool, ActorPrompts.load(PROMPTS), in_flight=2)
            return await runner.stream(specs(4, max_actions=2), memory, batch_size=2,
                                       checkpoints=tmp_path / "ckpt",
                                       on_batch=lambda k, m: states.append(m.state()))

    eps = asyncio.run(main())
    write_episodes(eps, {"model": "loop", "env": "scienceworld", "condition": "ace"}, {t: i for i, t in enumerate(TASKS)},
                   str(tmp_path / "episodes.parquet"), str(tmp_path / "steps.parquet"))
    steps = pd.read_parquet(tmp_path / "steps.parquet")
    rec = pd.DataFrame(calls(tmp_path / "calls.parquet")).set_index("call_id")
    assert [[x["id"] for x in s["lessons"]] for s in states] == [["str-00001"], ["str-00001", "str-00002"]]
    start = [{"lessons": []}, states[0]]  # the playbook at each batch's start
    for i, sp in enumerate(specs(4)):
        at_start = start[i // 2]
        g = steps[steps["episode_id"] == sp.episode_id].sort_values("step")
        assert len(g) >= 1
        for _, row in g.iterrows():
            assert json.loads(row["memory_ids"]) == [x["id"] for x in at_start["lessons"]], sp.episode_id
        prompt = rec.loc[g.iloc[0]["call_id"], "messages"][-1]["content"]
        if at_start["lessons"]:
            assert "Playbook:\n- Lesson written when the playbook held 0.\n" in prompt
            assert "helpful=" not in prompt
        else:
            assert "Playbook:" not in prompt
    # batch 1's two episodes each tagged the lesson of batch 0 helpful, once, after both reflections
    assert states[0]["lessons"][0]["helpful"] == 0 and states[1]["lessons"][0]["helpful"] == 2
    assert states[1]["lessons"][1]["text"] == "Lesson written when the playbook held 1."
    assert (rec["purpose"] == "ace_reflector").sum() == 4 and (rec["purpose"] == "ace_curator").sum() == 2
    assert not (tmp_path / "ckpt").exists()



def test_a_structured_endpoint_decodes_bounded_schemas_and_answers_are_judged_by_the_plain_ones(loopback, tmp_path):
    """Shown ids, listed sections and lengths that fit the role's cap reach the endpoint as its
    response_format; a reply the loopback writes beyond them (it follows no grammar) is still
    judged by the plain schemas, so the decoding bounds change no answer's validity."""
    import jsonschema

    from memtrials.memory.ace import SECTIONS
    from memtrials.memory.ace_schemas import (
        CURATION_SCHEMA, REFLECTION_SCHEMA, curation_decoding, reflection_decoding,
    )

    r = reflection_decoding(["str-00001", "api-00002"], 128)
    assert r["properties"]["analysis"]["maxLength"] == 64 and r["properties"]["tags"]["maxItems"] == 2
    assert r["properties"]["tags"]["items"]["properties"]["id"]["enum"] == ["str-00001", "api-00002"]
    assert reflection_decoding([], 128)["properties"]["tags"]["maxItems"] == 0  # nothing shown: no tag
    assert reflection_decoding(["x"] * 40, 128)["properties"]["tags"]["maxItems"] == 1  # dedup ids
    many = [f"str-{i:05d}" for i in range(40)]
    assert reflection_decoding(many, 128)["properties"]["tags"]["maxItems"] == 7  # what fits the cap
    assert "maxLength" not in reflection_decoding(many, None)["properties"]["analysis"]
    c = curation_decoding(list(SECTIONS), 160)
    ops = c["properties"]["operations"]
    assert c["properties"]["reasoning"]["maxLength"] == 80 and ops["maxItems"] == 2
    assert ops["items"]["properties"]["content"]["maxLength"] == 160
    assert ops["items"]["properties"]["section"]["enum"] == list(SECTIONS)
    assert "maxLength" not in CURATION_SCHEMA["properties"]["reasoning"]  # the plain schemas are untouched
    assert "maxItems" not in REFLECTION_SCHEMA["properties"]["tags"]
    long = {"reasoning": "x" * 500, "operations": [{"type": "ADD", "section": "str", "content": "y" * 300}] * 3}
    jsonschema.validate(long, CURATION_SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(long, c)

    seen = []
    # beyond the decoding bounds (analysis 64 and reasoning 80 characters, 1 tag, 2 operations),
    # within the loopback's cut at max_tokens
    planted = json.dumps({"analysis": "a" * 70, "tags": [{"id": "str-00001", "tag": "helpful"}] * 3})
    curated = json.dumps({"reasoning": "r" * 90, "operations": [
        {"type": "ADD", "section": "Misc Stuff", "content": f"Check the {w}."} for w in ("apple", "door", "key")]})

    def policy(body):
        seen.append(body.get("response_format"))
        return planted if body["messages"][0]["content"].startswith(REFLECTOR) else curated

    srv = loopback(policy=policy, embed_dim=64)
    m = loaded([{"id": "str-00001", "section": "str", "text": "Read the task.", "helpful": 0, "harmful": 0,
                 "neutral": 0, "batch": 0, "call_id": None}], reflector_max_tokens=128, curator_max_tokens=160)
    m.embedder = None  # no near-duplicate merge: every added lesson stays
    update(config(tmp_path, srv), m, [[episode("e1", "boil water", served=["str-00001"])]], tmp_path / "r.parquet")
    sent = {f["json_schema"]["name"]: f["json_schema"]["schema"] for f in seen if f}
    assert sent["reflection"] == reflection_decoding(["str-00001"], 128)
    assert sent["curation"] == curation_decoding(list(SECTIONS), 160)
    # beyond every decoding bound, yet valid by the plain schemas: tagged once, three lessons added
    assert m.rejected == [] and m.history[0]["curator"]["valid"], (m.rejected, m.history)
    assert m.lessons[0]["helpful"] == 1 and len(m.lessons) == 4
