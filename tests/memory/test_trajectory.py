"""Trajectory memory on the loopback endpoint: every episode kept (observations truncated),
the five most similar tasks served, evaluation leaves it unchanged, snapshots round-trip,
and a real ScienceWorld stream shows each batch the runs kept before it.

:func:`stream` (a ScienceWorld stream through the runner) is shared by the abstraction
and anti-persistence tests."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from memtrials.llm import open_client
from memtrials.memory.base import TaskContext
from memtrials.memory.snapshot import restore, write_snapshot
from memtrials.memory.trajectory import TrajectoryMemory, VectorIndex, text_key
from memtrials.testing.policies import first_admissible

from .helpers import calls, config, episode, update


def serve(cfg, view, task: str, eid: str = "q", records: Path | None = None):
    """``view.for_episode`` for one task; returns the episode memory."""
    async def main():
        out = records or Path(cfg["cache"]["path"]).parent / f"{eid}.parquet"
        async with open_client(cfg, "tests/serve", out) as c:
            return await view.for_episode(c, TaskContext("scienceworld", eid, task, eid))
    return asyncio.run(main())


def stream(tmp_path: Path, srv: Any, memory: Any, *, n: int = 4, batch: int = 2, max_actions: int = 2,
           specs_fn=None) -> tuple[list, pd.DataFrame, pd.DataFrame, list[dict]]:
    """Real ScienceWorld episodes through ``Runner.stream`` (batches of ``batch``, checkpoints
    on): the episodes, the step table, the call records (indexed by call id, messages
    decoded) and the memory's state after each batch."""
    from memtrials.agent.prompts import ActorPrompts
    from memtrials.agent.runner import Runner, episode_schema, write_episodes
    from memtrials.agent.records import STEP_SCHEMA
    from memtrials.envs.pool import EnvPool, env_factory

    from tests.agent.stream_cell import PROMPTS, TASKS, specs

    cfg = config(tmp_path, srv)
    states: list[dict] = []
    sp = (specs_fn or specs)(n, max_actions=max_actions)

    async def main():
        async with EnvPool(env_factory("scienceworld"), 1) as pool, \
                open_client(cfg, "tests/antipersist-stream", tmp_path / "calls.parquet") as client:
            runner = Runner(client, pool, ActorPrompts.load(PROMPTS), in_flight=2)
            return await runner.stream(sp, memory, batch_size=batch, checkpoints=tmp_path / "ckpt",
                                       on_batch=lambda k, m: states.append(json.loads(json.dumps(m.state()))))

    eps = asyncio.run(main())
    cols = memory.frozen().episode_columns
    write_episodes(eps, {"model": "loop", "env": "scienceworld", "condition": memory.kind},
                   {t: i for i, t in enumerate(TASKS)}, str(tmp_path / "episodes.parquet"),
                   str(tmp_path / "steps.parquet"), schema=episode_schema(cols),
                   step_schema=episode_schema((), STEP_SCHEMA))
    rec = pd.DataFrame(calls(tmp_path / "calls.parquet")).set_index("call_id")
    assert not (tmp_path / "ckpt").exists()
    return eps, pd.read_parquet(tmp_path / "steps.parquet"), rec, states


def first_prompt(steps: pd.DataFrame, rec: pd.DataFrame, eid: str) -> str:
    g = steps[steps["episode_id"] == eid].sort_values("step")
    return rec.loc[g.iloc[0]["call_id"], "messages"][-1]["content"]


def test_every_episode_is_kept_with_observations_truncated(loopback, tmp_path):
    srv = loopback(policy=first_admissible, embed_dim=32)
    cfg = config(tmp_path, srv)
    m = TrajectoryMemory(embedder="emb", obs_chars=12)
    long_obs = ["you   see a very long corridor with doors", "a door opens onto the kitchen"]
    update(cfg, m, [[episode("e1", "boil water", won=True, observations=long_obs),
                     episode("e2", "find a key", n_steps=1)]], tmp_path / "a.parquet")
    update(cfg, m, [[episode("e3", "boil water", n_steps=3)]], tmp_path / "b.parquet")
    r1 = m.records[0]
    assert [r["id"] for r in m.records] == ["T00001", "T00002", "T00003"]
    assert (r1["episode_id"], r1["task"], r1["won"], r1["n_steps"]) == ("e1", "boil water", True, 2)
    # 12 characters, spacing collapsed
    assert [s["observation"] for s in r1["steps"]] == ["you see a ve", "a door opens"]
    assert [s["action"] for s in r1["steps"]] == ["look at item 1", "look at item 2"]
    assert not m.records[1]["won"] and len(m.records[2]["steps"]) == 3
    # each distinct task text embedded once, when first kept; the repeat made no call
    a, b = calls(tmp_path / "a.parquet"), calls(tmp_path / "b.parquet")
    assert sorted(r["purpose"] for r in a) == ["memory_index", "memory_index"] and b == []
    assert set(m.index.state()) == {text_key("boil water"), text_key("find a key")}


def test_the_five_most_similar_tasks_are_served(loopback, tmp_path):
    srv = loopback(policy=first_admissible, embed_dim=64)
    cfg = config(tmp_path, srv)
    m = TrajectoryMemory(embedder="emb")
    tasks = [f"task number {i}" for i in range(7)]
    update(cfg, m, [[episode(f"e{i}", t, won=i % 2 == 0) for i, t in enumerate(tasks)]], tmp_path / "a.parquet")
    view = m.frozen()
    served = serve(cfg, view, "task number 3", records=tmp_path / "q.parquet")
    block = served.at_step(None).block
    info = json.loads(served.columns["retrieval"])
    assert len(block.ids) == 5 and block.ids[0] == "T00004" and info[0] == {"id": "T00004", "cosine": 1.0}
    assert [x["id"] for x in info] == list(block.ids) and served.columns["synthesis_calls"] == 0
    assert [x["cosine"] for x in info] == sorted((x["cosine"] for x in info), reverse=True)
    text = block.render()
    assert text.startswith("Earlier attempts at similar tasks:\n\n[T00004] Task: task number 3\n"
                           "Outcome: failed after 2 actions\nAction 1: look at item 1\nReturned: you see item 1")
    assert text.count("Task: ") == 5
    # the query is one recorded embedding call (a replay here: the text was indexed)
    assert len(calls(tmp_path / "q.parquet")) == 1
    # k is a setting; an empty store serves nothing
    small = TrajectoryMemory(embedder="emb", k=2)
    small.load(m.state())
    assert serve(cfg, small.frozen(), "task number 3", "q2").at_step(None).block.ids == ("T00004", block.ids[1])
    empty = serve(cfg, TrajectoryMemory(embedder="emb").frozen(), "anything", "q3")
    assert empty.at_step(None).block is None and json.loads(empty.columns["retrieval"]) == []
    with pytest.raises(ValueError, match="k must be >= 1"):
        TrajectoryMemory(embedder="emb", k=0)


def test_evaluation_leaves_it_unchanged_and_snapshots_round_trip(loopback, tmp_path):
    srv = loopback(policy=first_admissible, embed_dim=32)
    cfg = config(tmp_path, srv)
    m = TrajectoryMemory(embedder="emb")
    update(cfg, m, [[episode("e1", "boil water", won=True), episode("e2", "find a key")]], tmp_path / "a.parquet")
    before = json.dumps(m.state(), sort_keys=True)
    view = m.frozen()
    first = serve(cfg, view, "boil water", "q1").at_step(None).block.render()
    assert json.dumps(m.state(), sort_keys=True) == before  # serving (evaluation) changed nothing
    update(cfg, m, [[episode("e3", "boil water")]], tmp_path / "b.parquet")
    assert serve(cfg, view, "boil water", "q1").at_step(None).block.render() == first  # the view stayed frozen
    snap = write_snapshot(tmp_path / "snap.json", m, round=1)
    other = TrajectoryMemory(embedder="emb")
    restore(other, tmp_path / "snap.json")
    assert other.state() == m.state()
    assert write_snapshot(tmp_path / "b.json", other, round=1)["digest"] == snap["digest"]
    assert serve(cfg, other.frozen(), "boil water", "q4").at_step(None).block.render() == \
        serve(cfg, m.frozen(), "boil water", "q4").at_step(None).block.render()
    # vectors are kept compactly as float32 and come back exactly
    idx = VectorIndex("emb")
    idx.load(m.index.state())
    assert (idx.vector("boil water") == m.index.vector("boil water")).all()


@pytest.mark.slow
def test_a_stream_serves_each_batch_the_runs_kept_before_it(loopback, tmp_path):
    """ScienceWorld, B = 2, 4 episodes over three tasks: batch 1's episode of task 0 is served
    batch 0's run of task 0 first (cosine 1), exactly as recorded (one environment object: the
    episodes of a batch take turns on it)."""
    srv = loopback(policy=first_admissible, embed_dim=64)
    m = TrajectoryMemory(embedder="emb")
    eps, steps, rec, states = stream(tmp_path, srv, m)
    assert [len(s["records"]) for s in states] == [2, 4]
    assert [r["episode_id"] for r in m.records] == [e.summary["episode_id"] for e in eps]
    for ep, r in zip(eps, m.records):  # what is stored is what happened
        assert [s["action"] for s in r["steps"]] == [s["action"] for s in ep.steps]
        assert r["won"] == ep.summary["won"] and r["task"] == ep.summary["task"]
    for ep in eps[:2]:
        assert "Earlier attempts" not in first_prompt(steps, rec, ep.summary["episode_id"])
        assert json.loads(ep.summary["retrieval"]) == []
    assert eps[3].summary["task_id"] == eps[0].summary["task_id"]
    ep2 = eps[3]  # task 0 again
    info = json.loads(ep2.summary["retrieval"])
    assert [x["id"] for x in info] == ["T00001", "T00002"] and info[0]["cosine"] == 1.0
    prompt = first_prompt(steps, rec, ep2.summary["episode_id"])
    assert f"Earlier attempts at similar tasks:\n\n[T00001] Task: {eps[0].summary['task']}\n" in prompt
    assert f"Action 1: {eps[0].steps[0]['action']}" in prompt
    g = steps[steps["episode_id"] == ep2.summary["episode_id"]]
    assert all(json.loads(x) == ["T00001", "T00002"] for x in g["memory_ids"])
    # model calls: one per actor step; one embedding per distinct task text (a query of an indexed
    # text replays its record), and no other call
    assert (rec["purpose"] == "actor").sum() == sum(len(e.steps) for e in eps)
    assert (rec["purpose"] != "actor").sum() == 3
