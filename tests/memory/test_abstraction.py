"""Abstraction memory (rules synthesized after each episode, kept, retrieved) and joint memory
(trajectories and rules) on the loopback endpoint, and an abstraction stream on ScienceWorld
whose later prompts show rules, not trajectories."""

from __future__ import annotations

import json

import pytest

from memtrials.memory.abstraction import AbstractionMemory, JointMemory
from memtrials.memory.snapshot import restore, write_snapshot
from memtrials.memory.trajectory import text_key
from memtrials.testing.policies import first_admissible

from .helpers import calls, config, episode, update
from .test_trajectory import first_prompt, serve, stream

SYNTH = "You turn one finished attempt"


def policy(rules_for=None):
    """Synthesis calls answer rules named after the task (``rules_for(task) -> list | str``);
    the actor takes the first admissible action."""
    def answer(body):
        msgs = body["messages"]
        if msgs[0]["content"].startswith(SYNTH):
            task = msgs[-1]["content"].splitlines()[0].removeprefix("Task: ")
            out = rules_for(task) if rules_for else [f"Rule about {task}."]
            return out if isinstance(out, str) else json.dumps({"rules": out})
        return first_admissible(body)
    return answer


def memory(**kw):
    return AbstractionMemory(synthesizer="loop", embedder="emb", **kw)


def test_rules_are_synthesized_after_each_episode_and_kept(loopback, tmp_path):
    def rules_for(task):
        return {"boil water": ["Turn on the stove first.", "  ", "turn on the STOVE first."],
                "find a key": "not json", "open the door": ["Turn on the stove first.", "Pull the handle."]}[task]

    srv = loopback(policy=policy(rules_for), embed_dim=32)
    cfg = config(tmp_path, srv)
    m = memory()
    update(cfg, m, [[episode("e1", "boil water", won=True), episode("e2", "find a key")]], tmp_path / "a.parquet")
    update(cfg, m, [[episode("e3", "open the door")]], tmp_path / "b.parquet")
    assert [(r["id"], r["text"], r["episode_id"]) for r in m.rules] == [
        ("R00001", "Turn on the stove first.", "e1"), ("R00002", "Pull the handle.", "e3")]
    assert m.history[0] == {"batch": 0, "added": ["R00001"], "duplicates": 1, "empty": 1}
    assert m.history[1]["duplicates"] == 1  # a rule already kept is not added again
    assert [x["episode_id"] for x in m.rejected] == ["e2"] and m.update_calls == {"e1": 1, "e2": 1, "e3": 1}
    a = calls(tmp_path / "a.parquet")
    synth = [r for r in a if r["purpose"] == "abstraction_synthesis"]
    assert len(synth) == 2
    user = next(r for r in synth if "boil water" in r["messages"][-1]["content"])["messages"][-1]["content"]
    assert user.startswith("Task: boil water\nOutcome: succeeded after 2 actions\n")
    assert "Action 2: look at item 2\nReturned: you see item 2 on the table" in user and "at most 3 rules" in user
    sys_msg = synth[0]["messages"][0]["content"]
    assert not sys_msg.startswith("<!--") and '{"rules"' in sys_msg  # the header comment is not sent
    # kept rules are embedded once, when added
    assert set(m.index.state()) == {text_key(r["text"]) for r in m.rules}


def test_later_tasks_are_served_retrieved_rules_not_trajectories(loopback, tmp_path):
    srv = loopback(policy=policy(lambda t: [t]), embed_dim=64)  # each rule's text is its task's text
    cfg = config(tmp_path, srv)
    m = memory(k=2)
    update(cfg, m, [[episode(f"e{i}", f"task number {i}") for i in range(5)]], tmp_path / "a.parquet")
    served = serve(cfg, m.frozen(), "task number 3", "q1")
    block = served.at_step(None).block
    assert block.ids[0] == "R00004" and len(block.ids) == 2
    assert block.render().startswith("Rules from earlier tasks:\n- task number 3\n- ")
    assert "Task:" not in block.render() and "Action 1" not in block.render()
    info = json.loads(served.columns["retrieval"])
    assert info[0] == {"id": "R00004", "cosine": 1.0} and served.columns["synthesis_calls"] == 0
    assert serve(cfg, memory().frozen(), "x", "q2").at_step(None).block is None


def test_evaluation_leaves_it_unchanged_and_snapshots_round_trip(loopback, tmp_path):
    srv = loopback(policy=policy(), embed_dim=32)
    cfg = config(tmp_path, srv)
    m = memory()
    update(cfg, m, [[episode("e1", "boil water"), episode("e2", "find a key")]], tmp_path / "a.parquet")
    before = json.dumps(m.state(), sort_keys=True)
    view = m.frozen()
    text = serve(cfg, view, "boil water", "q1").at_step(None).block.render()
    assert json.dumps(m.state(), sort_keys=True) == before
    update(cfg, m, [[episode("e3", "boil water again")]], tmp_path / "b.parquet")
    assert serve(cfg, view, "boil water", "q1").at_step(None).block.render() == text
    snap = write_snapshot(tmp_path / "s.json", m)
    other = memory()
    restore(other, tmp_path / "s.json")
    assert other.state() == m.state() and write_snapshot(tmp_path / "t.json", other)["digest"] == snap["digest"]
    assert serve(cfg, other.frozen(), "boil water", "q3").at_step(None).block.render() == \
        serve(cfg, m.frozen(), "boil water", "q3").at_step(None).block.render()
    with pytest.raises(ValueError, match="max_rules must be >= 1"):
        memory(max_rules=0)


def test_joint_memory_keeps_and_serves_both(loopback, tmp_path):
    srv = loopback(policy=policy(lambda t: [f"About {t}."]), embed_dim=64)
    cfg = config(tmp_path, srv)
    m = JointMemory(synthesizer="loop", embedder="emb", k=2)
    update(cfg, m, [[episode("e1", "boil water", won=True), episode("e2", "find a key")]], tmp_path / "a.parquet")
    assert [r["id"] for r in m.trajectories.records] == ["T00001", "T00002"]
    assert [r["text"] for r in m.abstraction.rules] == ["About boil water.", "About find a key."]
    assert m.update_calls == {"e1": 1, "e2": 1}
    served = serve(cfg, m.frozen(), "boil water", "q1", records=tmp_path / "q.parquet")
    block = served.at_step(None).block
    assert block.ids[:2] == ("T00001", "T00002") and set(block.ids[2:]) == {"R00001", "R00002"}
    text = block.render()
    assert text.startswith("Earlier attempts at similar tasks:\n\n[T00001] Task: boil water\n")
    assert "\nRules from earlier tasks:\n- " in text and text.index("Rules from") > text.index("[T00002]")
    assert len(calls(tmp_path / "q.parquet")) == 1  # one query vector for both stores
    assert [x["id"] for x in json.loads(served.columns["retrieval"])] == list(block.ids)
    before = json.dumps(m.state(), sort_keys=True)
    other = JointMemory(synthesizer="loop", embedder="emb", k=2)
    write_snapshot(tmp_path / "j.json", m)
    restore(other, tmp_path / "j.json")
    assert json.dumps(other.state(), sort_keys=True) == before
    assert serve(cfg, other.frozen(), "boil water", "q2").at_step(None).block.render() == text
    assert json.dumps(m.state(), sort_keys=True) == before


@pytest.mark.slow
def test_a_stream_serves_rules_kept_from_earlier_batches(loopback, tmp_path):
    """ScienceWorld, B = 2 (three tasks, the fourth episode repeats the first task): one synthesis
    call per episode after its batch; batch 1's prompts show batch 0's rules and no trajectory."""
    srv = loopback(policy=policy(lambda t: [f"When asked to {t[:40]}, look around first."]), embed_dim=64)
    m = memory()
    eps, steps, rec, states = stream(tmp_path, srv, m)
    # episode 3 meets task 0 again: its rule repeats episode 0's and is not kept twice
    assert [len(s["rules"]) for s in states] == [2, 3] and m.history[1]["duplicates"] == 1
    assert [r["episode_id"] for r in m.rules] == [e.summary["episode_id"] for e in eps[:3]]
    assert (rec["purpose"] == "abstraction_synthesis").sum() == 4 and m.update_calls == {
        e.summary["episode_id"]: 1 for e in eps}
    for ep in eps[:2]:
        assert "Rules from earlier tasks" not in first_prompt(steps, rec, ep.summary["episode_id"])
    for ep in eps[2:]:
        prompt = first_prompt(steps, rec, ep.summary["episode_id"])
        assert "Rules from earlier tasks:\n- When asked to " in prompt and "Earlier attempts" not in prompt
        ids = json.loads(steps[steps["episode_id"] == ep.summary["episode_id"]].iloc[0]["memory_ids"])
        assert sorted(ids) == ["R00001", "R00002"]
        assert all(m.rules[int(i[1:]) - 1]["text"] in prompt for i in ids)


def test_lineage_records_the_rules_served_to_the_episode_a_synthesis_read(loopback, tmp_path):
    """Issue 36, anti-persistence 3: each synthesis records the stored rules its episode was
    served (its parents) and what it wrote, a repeat of a stored rule as that rule, not admitted."""
    srv = loopback(policy=policy(lambda task: ["Open the fridge first."] if "egg" in task
                                 else ["Open the fridge first.", f"Rule about {task}."]))
    cfg = config(tmp_path, srv)
    m = JointMemory(synthesizer="loop", embedder="emb")
    update(cfg, m, [[episode("e1", "cool apple")]], tmp_path / "a.parquet")
    later = episode("e2", "heat egg")
    later.summary["retrieval"] = json.dumps([{"id": "T00001", "cosine": 0.5}, {"id": "R00002", "cosine": 0.4}])
    update(cfg, m, [[later]], tmp_path / "b.parquet")
    lin = m.abstraction.state()["lineage"]
    assert lin[0] == {"episode_id": "e1", "parents": [],
                      "generated": [{"id": "R00001", "admitted": True}, {"id": "R00002", "admitted": True}]}
    assert lin[1] == {"episode_id": "e2", "parents": ["R00002"], "generated": [{"id": "R00001", "admitted": False}]}
    assert [r["parents"] for r in m.abstraction.rules] == [[], []]
    assert m.state()["abstraction"]["lineage"] == lin
