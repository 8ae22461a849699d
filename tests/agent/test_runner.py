"""The one episode runner: orders of play, memory serving, snapshots, kill -9 and resume.

Real ScienceWorld episodes against the loopback endpoint; the memory is the project's
lesson log (one lesson per finished episode, written by a model call).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from memtrials.llm import read_records
from memtrials.memory.lessons import LessonLog
from memtrials.memory.snapshot import SnapshotError, read_snapshot, restore, write_snapshot
from memtrials.testing import Faults

from .stream_cell import MEMORY_PROMPTS, run, specs

LESSON_SYSTEM = "You keep a short list of lessons"


def policy(body):
    """Lesson requests get a lesson naming the episode's task; actors the first listed action."""
    from memtrials.testing.policies import make_policy

    msgs = body.get("messages") or []
    if msgs and msgs[0].get("content", "").startswith(LESSON_SYSTEM):
        import hashlib

        task = msgs[-1]["content"].splitlines()[0]
        h = int(hashlib.sha256(msgs[-1]["content"].encode()).hexdigest()[:6], 16) % 1000
        return f"Lesson {h}: look before acting in {task[6:30]}."
    return make_policy("first_admissible")(body)


def served_ids(steps: pd.DataFrame) -> dict[str, list[str]]:
    """The lesson ids each episode's prompts contained (the same at every step of an episode)."""
    out = {}
    for eid, g in steps.groupby("episode_id"):
        ids = {tuple(json.loads(x)) for x in g["memory_ids"]}
        assert len(ids) == 1, f"{eid}: the memory changed within an episode: {ids}"
        out[eid] = list(ids.pop())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 2, 6])
def test_stream_episode_k_sees_exactly_the_updates_of_earlier_batches(loopback, make_config, tmp_path, batch):
    srv = loopback(policy=policy)
    cfg = make_config(srv)
    asyncio.run(run(cfg, tmp_path, batch))
    steps = pd.read_parquet(tmp_path / "steps.parquet")
    snap = read_snapshot(tmp_path / "memory.json", "lesson_log")
    lessons = snap["state"]["lessons"]
    assert [x["id"] for x in lessons] == [f"L{i:05d}" for i in range(1, 7)]
    assert [x["source"] for x in lessons] == [f"stream/{i:02d}" for i in range(6)]  # run order
    ids = served_ids(steps)
    calls = read_records(tmp_path / "calls.parquet").to_pandas().set_index("call_id")
    for i, spec in enumerate(specs()):
        before = (i // batch) * batch  # lessons of the batches before this episode's
        assert ids[spec.episode_id] == [f"L{j:05d}" for j in range(1, before + 1)], spec.episode_id
        # and the prompt text held exactly those lessons
        first = steps[steps["episode_id"] == spec.episode_id].sort_values("step").iloc[0]
        prompt = json.loads(calls.loc[first["call_id"], "messages"])[-1]["content"]
        assert prompt.count("\n- Lesson ") == before, spec.episode_id
        if before:
            assert LessonLog.block_of(lessons[:before]).render() in prompt
    assert (calls["purpose"] == "memory_update").sum() == 6


@pytest.mark.slow
def test_concurrent_episodes_all_see_the_same_frozen_snapshot(loopback, make_config, tmp_path, monkeypatch):
    from memtrials.agent import order as order_module
    from memtrials.agent.prompts import ActorPrompts
    from memtrials.agent.runner import Runner
    from memtrials.envs.pool import EnvPool, env_factory
    from memtrials.llm import open_client

    from .stream_cell import PROMPTS

    orders = []  # each episode's requests are ranked by its own order (memtrials.agent.order)

    class Counted(order_module.EpisodeOrder):
        def __init__(self, admission):
            super().__init__(admission)
            orders.append(self)

    monkeypatch.setattr(order_module, "EpisodeOrder", Counted)
    srv = loopback(policy=policy)
    cfg = make_config(srv)
    memory = LessonLog("loop", MEMORY_PROMPTS)
    memory.load({"lessons": [{"id": "L00001", "text": "Open the door first.", "source": "x", "call_id": "c"},
                             {"id": "L00002", "text": "Read the task twice.", "source": "y", "call_id": "d"}]})

    async def main():
        async with EnvPool(env_factory("scienceworld"), 2) as pool, open_client(cfg, "tests/concurrent") as client:
            runner = Runner(client, pool, ActorPrompts.load(PROMPTS), in_flight=2)
            view = memory.frozen()
            memory.lessons.append({"id": "L00003", "text": "Too late.", "source": "z", "call_id": "e"})
            return await runner.concurrent(specs(4), view)

    eps = asyncio.run(main())
    for ep in eps:
        assert {tuple(json.loads(st["memory_ids"])) for st in ep.steps} == {("L00001", "L00002")}
    assert srv.stats.completions == sum(len(ep.steps) for ep in eps)  # no update call in concurrent mode
    assert sorted(o.sent for o in orders) == sorted(len(ep.steps) for ep in eps)


def test_snapshot_round_trip_is_content_addressed_and_refuses_edits(tmp_path):
    a = LessonLog("loop", MEMORY_PROMPTS)
    a.load({"lessons": [{"id": "L00001", "text": "Look first. ü", "source": "e1", "call_id": "c1"}]})
    snap = write_snapshot(tmp_path / "a.json", a, round=3)
    b = LessonLog("loop", MEMORY_PROMPTS)
    restore(b, tmp_path / "a.json")
    assert b.state()["lessons"] == a.state()["lessons"] and b.block().ids == ("L00001",)
    assert write_snapshot(tmp_path / "b.json", b, round=3)["digest"] == snap["digest"]
    assert (tmp_path / "a.json").read_bytes() == (tmp_path / "b.json").read_bytes()
    edited = json.loads((tmp_path / "a.json").read_text())
    edited["state"]["lessons"][0]["text"] = "Something else."
    (tmp_path / "c.json").write_text(json.dumps(edited))
    with pytest.raises(SnapshotError, match="does not match its digest"):
        read_snapshot(tmp_path / "c.json")
    with pytest.raises(SnapshotError, match="expected 'playbook'"):
        read_snapshot(tmp_path / "a.json", "playbook")
    with pytest.raises(SnapshotError, match="not found"):
        read_snapshot(tmp_path / "missing.json")


TIMING = ["latency_s", "started_at", "finished_at"]


def _stream_proc(cfg: dict, out: Path, batch: int) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    (out / "cfg.json").write_text(json.dumps(cfg))
    return [sys.executable, str(Path(__file__).with_name("stream_cell.py")), str(out / "cfg.json"), str(out), str(batch)]


@pytest.mark.slow
def test_kill_9_mid_stream_resumes_from_the_last_checkpoint(loopback, make_config, tmp_path):
    from memtrials.llm.cache.sqlite import Cache

    srv = loopback(policy=policy, faults=Faults(latency_s=0.05))
    cfg = make_config(srv, cache_dir=tmp_path / "cache")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    out = tmp_path / "run"
    proc = subprocess.Popen(_stream_proc(cfg, out, 1), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while not (out / "checkpoints" / "batch-00002.json").exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the stream ended before it could be killed"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "memory.json").exists()
    cache = Cache(cfg["cache"]["path"])
    committed = len(cache.records())
    cache.close()
    srv.reset_stats()
    subprocess.run(_stream_proc(cfg, out, 1), env=env, check=True, capture_output=True, timeout=300)
    cache = Cache(cfg["cache"]["path"])
    total = len(cache.records())
    cache.close()
    assert srv.stats.completions == total - committed  # no completed call repeated, counted at the server
    assert not (out / "checkpoints").exists()  # removed once the stream completed

    # the resumed run equals a full replay of the same cache, byte for byte
    replay = tmp_path / "replay"
    srv.reset_stats()
    subprocess.run(_stream_proc(cfg, replay, 1), env=env, check=True, capture_output=True, timeout=300)
    assert srv.stats.completions == 0
    for name in ("episodes.parquet", "steps.parquet", "calls.parquet", "memory.json"):
        assert (out / name).read_bytes() == (replay / name).read_bytes(), name

    # and an uninterrupted run on a fresh cache (timing aside)
    clean = tmp_path / "clean"
    subprocess.run(_stream_proc(make_config(srv, cache_dir=tmp_path / "clean-cache"), clean, 1), env=env,
                   check=True, capture_output=True, timeout=300)
    assert read_snapshot(clean / "memory.json")["digest"] == read_snapshot(out / "memory.json")["digest"]
    a, b = pq.read_table(out / "calls.parquet"), pq.read_table(clean / "calls.parquet")
    assert a.drop(TIMING).equals(b.drop(TIMING))
    sa, sb = pd.read_parquet(out / "steps.parquet"), pd.read_parquet(clean / "steps.parquet")
    pd.testing.assert_frame_equal(sa.drop(columns=["latency_s"]), sb.drop(columns=["latency_s"]))


@pytest.mark.slow
def test_memory_declared_columns_are_recorded_per_step_and_episode(loopback, make_config, tmp_path):
    """A memory may declare columns (an arm and its propensity per episode, retrieved ids per
    step); the runner writes them beside the served lesson ids, with the declared types."""
    import pyarrow as pa

    from memtrials.memory.base import Lesson, MemoryBlock, StaticEpisode
    from memtrials.studies.history.design import actor_settings
    from memtrials.studies.history.rollouts import rollout_cell

    from .stream_cell import PROMPTS, TASKS

    class ArmView:
        step_columns = (pa.field("retrieved", pa.string()),)
        episode_columns = (pa.field("arm", pa.string()), pa.field("propensity", pa.float64()))

        async def for_episode(self, client, task):
            arm = "imitation" if task.task_id == TASKS[0] else "corrective"
            block = MemoryBlock((Lesson(f"{arm}-1", f"Guidance for {arm}."),), "Guidance")
            return StaticEpisode(block, {"arm": arm, "propensity": 0.25}, {"retrieved": json.dumps([task.task_id])})

    srv = loopback(policy="first_admissible")
    cfg = make_config(srv)
    s = actor_settings("loop", "raw", {"mode": "choice", "max_actions": 2, "max_output_tokens": 32,
                                       "max_listed_actions": 5})
    asyncio.run(rollout_cell(cfg, model="loop", env="scienceworld", condition="raw", tasks=TASKS[:2], seeds=[0, 1],
                             settings=s, actor_prompts_dir=PROMPTS, in_flight=2, out_episodes=str(tmp_path / "e.parquet"),
                             out_steps=str(tmp_path / "s.parquet"), out_calls=str(tmp_path / "c.parquet"),
                             memory=ArmView()))
    eps, steps = pq.read_table(tmp_path / "e.parquet"), pq.read_table(tmp_path / "s.parquet")
    assert eps.schema.field("propensity").type == pa.float64() and eps.column_names[-2:] == ["arm", "propensity"]
    assert eps.column("arm").to_pylist() == ["imitation", "corrective"]
    st = steps.to_pandas()
    assert st.columns[-1] == "retrieved"
    for _, row in st.iterrows():
        assert json.loads(row["retrieved"]) == [row["task_id"]]
        arm = "imitation" if row["task_id"] == TASKS[0] else "corrective"
        assert json.loads(row["memory_ids"]) == [f"{arm}-1"]
    calls = read_records(tmp_path / "c.parquet").to_pandas()
    assert all("Guidance:\n- Guidance for" in json.loads(m)[-1]["content"] for m in calls["messages"])


def test_top_k_retrieval_plants_a_match_and_breaks_ties_by_order():
    import numpy as np

    from memtrials.memory.retrieval import top_k

    rng = np.random.default_rng(0)
    keys = rng.normal(size=(50, 8))
    for planted in (0, 17, 49):
        query = keys[planted] * 3.0 + rng.normal(scale=0.01, size=8)  # scale does not matter
        idx, sims = top_k(query, keys, 3)
        assert idx[0] == planted and sims[0] > 0.99 and sims == sorted(sims, reverse=True)
    same = np.ones((4, 3))
    assert top_k(np.ones(3), same, 2)[0] == [0, 1]
    assert top_k(np.ones(3), np.zeros((0, 3)), 2) == ([], [])


def test_top_k_view_retrieves_through_the_embedder_and_records_it(loopback, tmp_path):
    import copy

    import yaml

    from memtrials.llm import open_client
    from memtrials.memory.base import Lesson, TaskContext
    from memtrials.memory.retrieval import TopKView
    from memtrials.testing import loopback_embed_endpoint, loopback_endpoint
    from tests.conftest import base_config

    srv = loopback()
    cfg = copy.deepcopy(base_config())
    (tmp_path / "models.yaml").write_text(yaml.safe_dump({"endpoints": {
        "loop": loopback_endpoint(srv), "emb": loopback_embed_endpoint(srv)}}))
    cfg.update(models_file=str(tmp_path / "models.yaml"), panel=["loop"], roles={"embedder": "emb"},
               cache={"path": str(tmp_path / "llm.sqlite"), "mode": "use", "backend": "sqlite"})
    task = "Your task is to boil water. First, focus on the substance."
    lessons = [Lesson("L1", "Open the fridge first."), Lesson("L2", task), Lesson("L3", "Read the thermometer.")]
    view = TopKView(lessons, 2, "emb")

    async def main():
        async with open_client(cfg, "tests/topk", tmp_path / "calls.parquet") as client:
            return await view.for_episode(client, TaskContext("scienceworld", "boil:0", task, "e1"))

    ep = asyncio.run(main())
    assert ep.block.ids[0] == "L2" and len(ep.block.ids) == 2  # the identical text is the nearest
    info = json.loads(ep.columns["retrieval"])
    assert info[0] == {"id": "L2", "cosine": 1.0}
    calls = read_records(tmp_path / "calls.parquet").to_pandas()
    assert (calls["purpose"] == "retrieval").sum() == 3  # one record per distinct text (L2 is the task text)
