"""ExpeL on the loopback endpoint: ADD / EDIT / REMOVE / AGREE with strengths, the rule cap,
pair and success-chunk comparisons, similarity retrieval of successes, invalid answers
recorded, snapshot round trip."""

from __future__ import annotations

import itertools
import json

from memtrials.memory.expel import ExpeLMemory, apply_operations
from memtrials.memory.snapshot import restore, write_snapshot

from .helpers import calls, config, episode, update
from .test_reflexion import PROMPTS, serve


def ops(*items):
    return json.dumps({"operations": [{"op": o, "number": n, "text": t} for o, n, t in items]})


def rules(*strengths):
    return [{"id": f"ins-{i:05d}", "text": f"rule {i}", "strength": s} for i, s in enumerate(strengths, 1)]


def ids():
    counter = itertools.count(100)
    return lambda: f"ins-{next(counter):05d}"


def test_operations_and_strengths():
    rs = rules(2, 1, 3)
    done = apply_operations(rs, [
        {"op": "ADD", "number": 0, "text": "  Check the   fridge. "}, {"op": "EDIT", "number": 1, "text": "rule one"},
        {"op": "AGREE", "number": 3, "text": ""}, {"op": "REMOVE", "number": 2, "text": ""},
        {"op": "AGREE", "number": 9, "text": ""}, {"op": "EDIT", "number": 3, "text": " "},
    ], max_rules=20, next_id=ids())
    assert [(x["id"], x["text"], x["strength"]) for x in rs] == [
        ("ins-00001", "rule one", 3), ("ins-00003", "rule 3", 4), ("ins-00100", "Check the fridge.", 2)]
    assert done["added"] == ["ins-00100"] and done["edited"] == ["ins-00001"] and done["agreed"] == ["ins-00003"]
    assert done["weakened"] == ["ins-00002"] and done["dropped"] == ["ins-00002"]  # 1 - 1 = 0: dropped
    assert [(x["number"], x["why"]) for x in done["ignored"]] == [(9, "no such insight"), (3, "empty text")]


def test_a_full_list_refuses_add_and_remove_costs_three():
    rs = rules(*([5] * 20))
    done = apply_operations(rs, [{"op": "ADD", "number": 0, "text": "new"}, {"op": "REMOVE", "number": 4, "text": ""},
                                 {"op": "REMOVE", "number": 5, "text": ""}, {"op": "REMOVE", "number": 5, "text": ""}],
                            max_rules=20, next_id=ids())
    assert done["added"] == [] and done["ignored"] == [{"op": "ADD", "number": 0, "why": "list full"}]
    strength = {x["id"]: x["strength"] for x in rs}
    assert strength["ins-00004"] == 2 and "ins-00005" not in strength and done["dropped"] == ["ins-00005"]
    assert len(rs) == 19
    # below the cap a REMOVE costs 1
    rs = rules(5, 5)
    apply_operations(rs, [{"op": "REMOVE", "number": 1, "text": ""}], max_rules=20, next_id=ids())
    assert rs[0]["strength"] == 4


def test_pairs_and_success_chunks_update_the_list_in_order(loopback, tmp_path):
    answers = iter([ops(("ADD", 0, "Open the fridge first.")),                       # batch 1: the success chunk
                    ops(("AGREE", 1, ""), ("ADD", 0, "Do not heat the apple.")),      # batch 2: the pair
                    ops(("EDIT", 2, "Never heat what must be cooled."), ("REMOVE", 1, ""))])  # batch 2: chunk

    def policy(body):
        return next(answers)

    srv = loopback(policy=policy, embed_dim=32)
    cfg = config(tmp_path, srv)
    m = ExpeLMemory(synthesizer="loop", embedder="emb", prompts_dir=PROMPTS, k=2, success_chunk=4)
    update(cfg, m, [[episode("w1", "cool apple", won=True), episode("f1", "heat egg")]], tmp_path / "a.parquet")
    assert [(x["id"], x["text"], x["strength"]) for x in m.rules] == [("ins-00001", "Open the fridge first.", 2)]
    update(cfg, m, [[episode("f2", "cool apple"), episode("w2", "wash mug", won=True)]], tmp_path / "b.parquet")
    assert [(x["id"], x["text"], x["strength"]) for x in m.rules] == [
        ("ins-00001", "Open the fridge first.", 2), ("ins-00002", "Never heat what must be cooled.", 3)]
    kinds = [(c["kind"], c["episodes"]) for h in m.history for c in h["calls"]]
    assert kinds == [("successes", ["w1"]), ("pair", ["f2", "w1"]), ("successes", ["w2"])]  # f1: no success of its task
    assert m.update_calls == {"w1": 1, "f2": 1, "w2": 1}
    msgs = [r["messages"][-1]["content"] for r in calls(tmp_path / "b.parquet")]
    pair = next(u for u in msgs if "Failed attempt:" in u)
    assert "Current insights (1 of at most 20):\n1. Open the fridge first." in pair and "Successful attempt:" in pair


def test_serves_insights_and_the_most_similar_successes(loopback, tmp_path):
    def policy(body):
        fresh = "(none yet)" in body["messages"][-1]["content"]
        return ops(("ADD", 0, "Look before acting.")) if fresh else ops(("AGREE", 1, ""))

    srv = loopback(policy=policy, embed_dim=64)
    cfg = config(tmp_path, srv)
    m = ExpeLMemory(synthesizer="loop", embedder="emb", prompts_dir=PROMPTS, k=1)
    update(cfg, m, [[episode("w1", "cool apple", won=True), episode("w2", "wash mug", won=True),
                     episode("f1", "wash mug")]], tmp_path / "a.parquet")
    (served,) = serve(cfg, m.frozen(), [("t", "wash mug")], tmp_path / "s.parquet")
    text = served.block.render()
    assert text.startswith("Insights from earlier tasks:\n- Look before acting.\n\nSuccessful attempts at similar tasks:")
    assert "Task: wash mug\nAction 1: look at item 1" in text and "cool apple" not in text  # k = 1, the identical task
    assert served.block.ids == ("ins-00001", "traj:w2")
    assert json.loads(served.columns["retrieval"]) == [{"id": "w2", "cosine": 1.0}]
    assert m.rules[0]["strength"] == 3  # added by the pair (f1, w2), agreed by the success chunk


def test_an_invalid_answer_changes_nothing_and_is_recorded(loopback, tmp_path):
    srv = loopback(policy=lambda body: "not json", embed_dim=16)
    m = ExpeLMemory(synthesizer="loop", embedder="emb", prompts_dir=PROMPTS)
    update(config(tmp_path, srv), m, [[episode("w1", "cool apple", won=True)]], tmp_path / "a.parquet")
    assert m.rules == [] and len(m.rejected) == 1 and m.rejected[0]["episode_id"] == "w1"
    assert m.history[0]["calls"][0]["valid"] is False and m.rejected[0]["error"]


def test_snapshot_round_trip(loopback, tmp_path):
    srv = loopback(policy=lambda body: ops(("ADD", 0, "Look before acting.")), embed_dim=16)
    m = ExpeLMemory(synthesizer="loop", embedder="emb", prompts_dir=PROMPTS)
    update(config(tmp_path, srv), m, [[episode("w1", "cool apple", won=True)]], tmp_path / "a.parquet")
    write_snapshot(tmp_path / "m.json", m)
    fresh = ExpeLMemory(synthesizer="loop", embedder="emb", prompts_dir=PROMPTS)
    restore(fresh, tmp_path / "m.json")
    assert fresh.state() == m.state() and fresh.frozen().rules == m.frozen().rules
