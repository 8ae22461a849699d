"""Reflexion on the loopback endpoint: a reflection only after a failure, kept per task
(last three), served only to the same task; empty replies recorded; snapshot round trip."""

from __future__ import annotations

import asyncio
import json

from memtrials.llm import open_client
from memtrials.memory.base import TaskContext
from memtrials.memory.reflexion import ReflexionMemory, prompt_body
from memtrials.memory.snapshot import read_snapshot, restore, write_snapshot
from tests.conftest import REPO

from .helpers import calls, config, episode, update

PROMPTS = REPO / "config" / "prompts" / "memory"
SYSTEM = "You look back on one failed attempt"


def serve(cfg, view, tasks, records):
    """``view.for_episode`` for each (task_id, task text); returns the served episodes."""
    async def main():
        async with open_client(cfg, "tests/memory/serve", records) as client:
            return [await view.for_episode(client, TaskContext("alfworld", t, text, f"ev/{t}")) for t, text in tasks]
    return asyncio.run(main())


def numbered(body):
    """Reflections that name the attempt they read (the first action line of the prompt)."""
    user = body["messages"][-1]["content"]
    task = user.splitlines()[0].removeprefix("Task: ")
    n = user.count("\n- ")
    return f"Next time in {task}, look first (seen {n} earlier)." if body["messages"][0]["content"].startswith(
        SYSTEM) else "look"


def test_reflects_only_after_failures_and_keeps_the_last_three_per_task(loopback, tmp_path):
    srv = loopback(policy=numbered)
    cfg = config(tmp_path, srv)
    m = ReflexionMemory(synthesizer="loop", prompts_dir=PROMPTS)
    batches = [[episode(f"e{i}", "cool apple", won=False), episode(f"w{i}", "heat egg", won=True)] for i in range(4)]
    batches.append([episode("f9", "heat egg", won=False)])
    update(cfg, m, batches, tmp_path / "c.parquet")
    rec = calls(tmp_path / "c.parquet")
    assert [r["purpose"] for r in rec] == ["reflexion_reflect"] * 5  # failures only
    kept = m.reflections["cool apple"]
    assert [x["episode_id"] for x in kept] == ["e1", "e2", "e3"]  # the last three
    assert [x["text"] for x in kept] == [f"Next time in cool apple, look first (seen {n} earlier)." for n in (1, 2, 3)]
    assert [x["id"] for x in m.reflections["heat egg"]] == ["rx-00005"]
    assert m.update_calls == {"e0": 1, "e1": 1, "e2": 1, "e3": 1, "f9": 1}
    # the prompt holds the task, the failed attempt and the earlier reflections on the same task
    apple = [r["messages"][-1]["content"] for r in rec if "cool apple" in r["messages"][-1]["content"]]
    last = max(apple, key=lambda u: u.count("\n- "))  # records are sorted by call id, not by time
    assert "Action 1: look at item 1\nReturned: you see item 1 on the table" in last
    assert last.count("- Next time in cool apple") == 3 and "heat egg" not in last
    assert rec[0]["messages"][0]["content"] == prompt_body((PROMPTS / "reflexion_system.md").read_text())
    assert not rec[0]["messages"][0]["content"].startswith("<!--")  # the header line stays in the file


def test_served_only_to_the_same_task_and_frozen(loopback, tmp_path):
    srv = loopback(policy=numbered, embed_dim=16)
    cfg = config(tmp_path, srv)
    m = ReflexionMemory(synthesizer="loop", prompts_dir=PROMPTS)
    update(cfg, m, [[episode("e1", "cool apple")]], tmp_path / "a.parquet")
    view = m.frozen()
    update(cfg, m, [[episode("e2", "cool apple")]], tmp_path / "b.parquet")
    same, other = serve(cfg, view, [("cool apple", "cool an apple"), ("heat egg", "heat an egg")], tmp_path / "s.parquet")
    assert same.block.render() == ("Reflections on your earlier attempts at this task:\n"
                                   "- Next time in cool apple, look first (seen 0 earlier).\n")
    assert same.columns == {"n_reflections_served": 1, "synthesis_calls": 0}
    assert other.block.render() == "" and other.columns["n_reflections_served"] == 0
    assert len(m.reflections["cool apple"]) == 2 and len(view.reflections["cool apple"]) == 1  # the view is a copy
    assert calls(tmp_path / "s.parquet") == []  # serving makes no call


def test_an_empty_reply_is_recorded_not_stored(loopback, tmp_path):
    srv = loopback(policy=lambda body: "   ")
    m = ReflexionMemory(synthesizer="loop", prompts_dir=PROMPTS)
    update(config(tmp_path, srv), m, [[episode("e1", "cool apple")]], tmp_path / "c.parquet")
    assert m.reflections == {} and len(m.rejected) == 1
    assert m.rejected[0]["episode_id"] == "e1" and "empty reflection" in m.rejected[0]["error"]
    assert m.rejected[0]["call_id"] == calls(tmp_path / "c.parquet")[0]["call_id"]


def test_snapshot_round_trip(loopback, tmp_path):
    srv = loopback(policy=numbered)
    m = ReflexionMemory(synthesizer="loop", prompts_dir=PROMPTS)
    update(config(tmp_path, srv), m, [[episode("e1", "cool apple"), episode("e2", "heat egg")]], tmp_path / "c.parquet")
    snap = write_snapshot(tmp_path / "m.json", m)
    fresh = ReflexionMemory(synthesizer="loop", prompts_dir=PROMPTS)
    restore(fresh, tmp_path / "m.json")
    assert fresh.state() == m.state() and read_snapshot(tmp_path / "m.json")["digest"] == snap["digest"]
    assert fresh.frozen().block("heat egg").ids == ("rx-00002",)


def test_cross_task_serves_similar_tasks_reflections_within_the_budget(loopback, tmp_path):
    """Issue 36, anti-persistence 1: a held-out task (never in training) is served the training
    reflections of the most similar tasks, its own first, at most k in all; the snapshot keeps
    the task vectors, and a restored memory serves the same."""
    srv = loopback(policy=numbered, embed_dim=16)
    cfg = config(tmp_path, srv)
    m = ReflexionMemory(synthesizer="loop", prompts_dir=PROMPTS, embedder="emb", k=2)
    update(cfg, m, [[episode("e1", "cool apple"), episode("e2", "heat egg"), episode("e3", "cool apple")]],
           tmp_path / "a.parquet")
    view = m.frozen()
    held, own = serve(cfg, view, [("put pan", "put pan"), ("heat egg", "heat egg")], tmp_path / "s.parquet")
    assert held.columns["n_reflections_served"] == 2 and len(held.block.lessons) == 2
    served = json.loads(held.columns["retrieval"])
    assert {x["id"] for x in served} <= {"rx-00001", "rx-00002", "rx-00003"} and len(served) == 2
    assert all(x["cosine"] is not None for x in served)
    assert "(on the task '" in held.block.render()
    # the task's own reflection first, then the other task's by similarity
    assert [x.id for x in own.block.lessons][0] == "rx-00002" and len(own.block.lessons) == 2
    recs = calls(tmp_path / "s.parquet")
    assert recs and {r["endpoint"] for r in recs} == {"emb"}  # serving embeds the task, no chat call
    path = tmp_path / "m.json"
    write_snapshot(path, m)
    fresh = ReflexionMemory(synthesizer="loop", prompts_dir=PROMPTS, embedder="emb", k=2)
    restore(fresh, path)
    again = serve(cfg, fresh.frozen(), [("put pan", "put pan")], tmp_path / "t.parquet")[0]
    assert again.block.render() == held.block.render()
