"""AutoRefine on the loopback endpoint: one contrastive call per batch, skills served by
similarity and credited with the outcome, the bottom 20 % by utility dropped every two
rounds, invalid answers recorded, snapshot round trip."""

from __future__ import annotations

import json

from memtrials.memory.autorefine import AutoRefineMemory, prune_order, utility
from memtrials.memory.snapshot import restore, write_snapshot

from .helpers import calls, config, episode, update
from .test_reflexion import PROMPTS, serve


def skills(*names):
    return json.dumps({"skills": [{"name": n, "text": f"do {n} carefully"} for n in names]})


def memory(**kw):
    return AutoRefineMemory(synthesizer="loop", embedder="emb", prompts_dir=PROMPTS, **{"round_size": 2, **kw})


def test_one_contrastive_call_per_batch_sees_both_sides(loopback, tmp_path):
    blank = json.dumps({"skills": [{"name": "open fridge", "text": "do open fridge carefully"},
                                   {"name": "blank", "text": "   "}]})
    answers = iter([blank, skills("wash first")])
    srv = loopback(policy=lambda body: next(answers), embed_dim=32)
    cfg = config(tmp_path, srv)
    m = memory()
    update(cfg, m, [[episode("w1", "cool apple", won=True), episode("f1", "heat egg")]], tmp_path / "a.parquet")
    update(cfg, m, [[episode("f2", "wash mug")]], tmp_path / "b.parquet")
    assert [(x["id"], x["name"]) for x in m.skills] == [("sk-00001", "open fridge"), ("sk-00002", "wash first")]
    (a,), (b,) = calls(tmp_path / "a.parquet"), calls(tmp_path / "b.parquet")
    assert a["purpose"] == b["purpose"] == "autorefine_synthesis"
    ua, ub = a["messages"][-1]["content"], b["messages"][-1]["content"]
    assert "Successful attempts:\nTask: cool apple" in ua and "Failed attempts:\nTask: heat egg" in ua
    assert "Skills already in the library:\n(none yet)" in ua
    # a batch of failures only: the latest stored success stands in for the other side
    assert "Successful attempts:\nTask: cool apple" in ub and "Failed attempts:\nTask: wash mug" in ub
    assert "- open fridge" in ub and m.update_calls == {"w1": 1, "f2": 1}


def test_served_by_similarity_and_credited(loopback, tmp_path):
    srv = loopback(policy=lambda body: skills("wash mug", "cool apple"), embed_dim=64)
    cfg = config(tmp_path, srv)
    m = memory(k=1)
    update(cfg, m, [[episode("w1", "a", won=True)]], tmp_path / "a.parquet")
    (served,) = serve(cfg, m.frozen(), [("t", "wash mug: do wash mug carefully")], tmp_path / "s.parquet")
    assert served.block.render() == "Skills from earlier tasks:\n- wash mug: do wash mug carefully\n"
    assert json.loads(served.columns["retrieval"]) == [{"id": "sk-00001", "cosine": 1.0}]
    update(cfg, m, [[episode("w2", "b", won=True, served=["sk-00001"]), episode("f2", "c", served=["sk-00001"]),
                     episode("f3", "d", served=["sk-00002", "sk-99999"])]], tmp_path / "b.parquet")
    got = {x["id"]: (x["uses"], x["successes"]) for x in m.skills[:2]}
    assert got == {"sk-00001": (2, 1), "sk-00002": (1, 0)}
    assert utility(m.skills[0]) == 0.5 and utility(m.skills[1]) == 1 / 3


def test_bottom_fifth_by_utility_dropped_every_two_rounds(loopback, tmp_path):
    names = [f"s{i}" for i in range(10)]
    srv = loopback(policy=lambda body: skills(*names) if "(none yet)" in body["messages"][-1]["content"]
                   else skills(), embed_dim=16)
    cfg = config(tmp_path, srv)
    m = memory(round_size=2)  # pruning after episodes 4, 8, ...
    update(cfg, m, [[episode("e1", "t", won=True)]], tmp_path / "1.parquet")
    assert len(m.skills) == 10
    # s3 and s7 served to failures, s5 to a success: s3 and s7 have the lowest utility
    update(cfg, m, [[episode("e2", "t", served=["sk-00004", "sk-00008"])]], tmp_path / "2.parquet")
    update(cfg, m, [[episode("e3", "t", won=True, served=["sk-00006"])]], tmp_path / "3.parquet")
    assert len(m.skills) == 10 and all(h["pruned"] == [] for h in m.history)  # 3 episodes: not yet two rounds
    update(cfg, m, [[episode("e4", "t", won=True)]], tmp_path / "4.parquet")
    assert m.history[-1]["pruned"] == ["sk-00004", "sk-00008"]  # floor(0.2 x 10) = 2
    assert len(m.skills) == 8
    for k in range(5, 8):
        update(cfg, m, [[episode(f"e{k}", "t", won=True)]], tmp_path / f"{k}.parquet")
    assert len(m.skills) == 8  # the next pruning is after episode 8
    update(cfg, m, [[episode("e8", "t", won=True)]], tmp_path / "8.parquet")
    assert len(m.skills) == 7 and m.history[-1]["pruned"] == ["sk-00001"]  # ties: fewer uses, then the older id
    assert prune_order([{"id": "b", "uses": 0, "successes": 0}, {"id": "a", "uses": 2, "successes": 1},
                        {"id": "c", "uses": 1, "successes": 0}]) == ["c", "b", "a"]


def test_an_invalid_answer_adds_nothing_and_is_recorded(loopback, tmp_path):
    srv = loopback(policy=lambda body: '{"skills": "many"}', embed_dim=16)
    m = memory()
    update(config(tmp_path, srv), m, [[episode("w1", "a", won=True)]], tmp_path / "a.parquet")
    assert m.skills == [] and len(m.rejected) == 1 and m.rejected[0]["call_id"] == m.history[0]["call_id"]


def test_snapshot_round_trip(loopback, tmp_path):
    srv = loopback(policy=lambda body: skills("x", "y"), embed_dim=16)
    m = memory()
    update(config(tmp_path, srv), m, [[episode("w1", "a", won=True), episode("f1", "b")]], tmp_path / "a.parquet")
    write_snapshot(tmp_path / "m.json", m)
    fresh = memory()
    restore(fresh, tmp_path / "m.json")
    assert fresh.state() == m.state()
