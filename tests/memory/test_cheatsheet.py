"""Dynamic Cheatsheet on the loopback endpoint: a rewrite replaces the cheatsheet with ids
kept for unchanged entries, a malformed rewrite keeps the old one and is recorded, the
curator never sees the reward, serving, snapshots."""

from __future__ import annotations

import json

import pytest

from memtrials.memory.cheatsheet import Cheatsheet, parse_cheatsheet, render_entries
from memtrials.memory.snapshot import read_snapshot, restore, write_snapshot

from .helpers import MEMORY_PROMPTS, calls, config, episode, update


def sheet(*entries):
    return "Here is the update.\n<cheatsheet>\n" + "\n".join(f'<entry uses="{u}">{t}</entry>' for t, u in entries) \
        + "\n</cheatsheet>"


def loaded(entries):
    m = Cheatsheet("loop", MEMORY_PROMPTS)
    m.load({"entries": [{"id": i, "text": t, "uses": u, "batch": 0, "call_id": "c0"} for i, t, u in entries],
            "counter": len(entries), "batches": 1, "rejected": [], "history": []})
    return m


def test_parse_reads_the_last_complete_block():
    entries, err = parse_cheatsheet('<cheatsheet><entry uses="1">old</entry></cheatsheet> then\n<cheatsheet>\n'
                                    'stray text\n<entry uses=3>Open  the\n door.</entry><entry>No count.</entry>'
                                    '<entry uses="2">   </entry></cheatsheet>')
    assert err is None and entries == [{"text": "Open the door.", "uses": 3}, {"text": "No count.", "uses": 0}]
    for bad, why in [("<cheatsheet><entry uses=\"1\">cut at the cap", "no complete"),
                     ("no tags at all", "no complete"), ("<cheatsheet>just prose</cheatsheet>", "no non-empty"),
                     ("<cheatsheet>\n</cheatsheet>", "no non-empty")]:
        assert parse_cheatsheet(bad)[0] is None and why in parse_cheatsheet(bad)[1]
    assert parse_cheatsheet(render_entries([{"text": "a b", "uses": 4}]))[0] == [{"text": "a b", "uses": 4}]


def test_a_rewrite_replaces_the_cheatsheet_keeping_ids_of_unchanged_entries(loopback, tmp_path):
    srv = loopback(policy={"script": [
        sheet(("Check the fridge first.", 1), ("Read the task twice.", 0)),
        sheet(("Read the task   twice.", 2), ("Heat water on the stove.", 1), ("Check the fridge first.", 1),
              ("Check the fridge first.", 0)),
    ]})
    cfg = config(tmp_path, srv)
    m = Cheatsheet("loop", MEMORY_PROMPTS)
    update(cfg, m, [[episode("e1", "boil water"), episode("e2", "cool an apple")]], tmp_path / "a.parquet")
    assert [(e["id"], e["text"], e["uses"]) for e in m.entries] == [
        ("dc-00001", "Check the fridge first.", 1), ("dc-00002", "Read the task twice.", 0)]
    update(cfg, m, [[episode("e3", "boil water")]], tmp_path / "b.parquet")
    assert [(e["id"], e["text"], e["uses"]) for e in m.entries] == [
        ("dc-00002", "Read the task twice.", 2), ("dc-00003", "Heat water on the stove.", 1),
        ("dc-00001", "Check the fridge first.", 1), ("dc-00004", "Check the fridge first.", 0)]
    h = m.history[1]
    assert h["accepted"] and h["kept"] == ["dc-00002", "dc-00001"] and h["new"] == ["dc-00003", "dc-00004"]
    assert h["dropped"] == [] and h["episodes"] == ["e3"]
    assert [e["batch"] for e in m.entries] == [0, 1, 0, 1]  # when each entry first appeared
    # a third rewrite that drops entries: they are gone from what is served
    srv2 = loopback(policy={"script": [sheet(("Heat water on the stove.", 2))]})
    update(config(tmp_path / "2", srv2), m, [[episode("e4", "x")]], tmp_path / "c.parquet")
    assert m.block().ids == ("dc-00003",) and m.history[2]["dropped"] == ["dc-00002", "dc-00001", "dc-00004"]
    assert m.counter == 4 and m.rejected == []
    # the curator read the cheatsheet with its counts, and one call per batch
    c = calls(tmp_path / "b.parquet")
    assert [r["purpose"] for r in c] == ["dc_curator"]
    assert '<entry uses="1">Check the fridge first.</entry>' in c[0]["messages"][-1]["content"]


def test_a_malformed_rewrite_keeps_the_old_cheatsheet_and_is_recorded(loopback, tmp_path):
    old = [("dc-00001", "Check the fridge first.", 2), ("dc-00002", "Read the task.", 0)]
    srv = loopback(policy={"script": ['<cheatsheet>\n<entry uses="3">Check the fridge first.</entry>\n<entry',
                                      "I would keep everything as it is.",
                                      "<cheatsheet>Everything as before.</cheatsheet>"]})
    m = loaded(old)
    before = [dict(e) for e in m.entries]
    cfg = config(tmp_path, srv)
    update(cfg, m, [[episode("e1", "x")], [episode("e2", "y")], [episode("e3", "z")]], tmp_path / "d.parquet")
    assert m.entries == before and m.counter == 2 and m.batches == 4
    c = {r["call_id"]: r for r in calls(tmp_path / "d.parquet")}
    assert [r["batch"] for r in m.rejected] == [1, 2, 3]
    assert all(r["call_id"] in c and c[r["call_id"]]["purpose"] == "dc_curator" for r in m.rejected)
    assert "no complete" in m.rejected[0]["error"] and "no non-empty" in m.rejected[2]["error"]
    assert [h["accepted"] for h in m.history] == [False, False, False]


def test_the_curator_never_sees_the_reward(loopback, tmp_path):
    srv = loopback(policy={"script": [sheet(("Look around.", 1))]})
    cfg = config(tmp_path, srv)
    obs = ["the kettle is on the stove", "the water is hot"]
    win = [episode("e1", "boil water", won=True, score=100.0, observations=obs),
           episode("e2", "cool an apple", won=False, score=20.0, observations=obs)]
    lose = [episode("e1", "boil water", won=False, score=0.0, observations=obs),
            episode("e2", "cool an apple", won=True, score=75.0, observations=obs)]
    a, b = Cheatsheet("loop", MEMORY_PROMPTS), Cheatsheet("loop", MEMORY_PROMPTS)
    assert a.messages(win) == b.messages(lose)  # outcomes differ, the request does not
    text = a.messages(win)[-1]["content"]
    assert "Task: boil water" in text and "the water is hot" in text
    for word in ("100", "75", "won", "completed", "reward", "score"):
        assert word not in text
    update(cfg, a, [win], tmp_path / "e.parquet")
    update(cfg, b, [lose], tmp_path / "f.parquet")
    assert srv.stats.completions == 1  # the second is the same request, replayed from the cache
    assert a.entries == b.entries


def test_frozen_serves_the_entries_in_order():
    m = loaded([("dc-00003", "Heat water.", 2), ("dc-00001", "Open the door.", 0)])
    view = m.frozen()
    assert view.block.ids == ("dc-00003", "dc-00001")
    assert view.block.render() == "Cheatsheet:\n- Heat water.\n- Open the door.\n"
    m.entries.pop()
    assert view.block.ids == ("dc-00003", "dc-00001")  # frozen
    shown = Cheatsheet("loop", MEMORY_PROMPTS, show_uses=True)
    shown.load(m.state())
    assert shown.block().render() == "Cheatsheet:\n- Heat water. (uses: 2)\n"
    assert Cheatsheet("loop", MEMORY_PROMPTS).frozen().block.render() == ""


def test_snapshot_round_trip(loopback, tmp_path):
    srv = loopback(policy={"script": [sheet(("Look around. ü", 1)), "not a cheatsheet"]})
    a = Cheatsheet("loop", MEMORY_PROMPTS)
    update(config(tmp_path, srv), a, [[episode("e1", "x")], [episode("e2", "y")]], tmp_path / "g.parquet")
    assert len(a.rejected) == 1 and a.block().ids == ("dc-00001",)
    snap = write_snapshot(tmp_path / "a.json", a, round=2)
    b = Cheatsheet("loop", MEMORY_PROMPTS)
    restore(b, tmp_path / "a.json")
    assert b.state() == a.state() and b.block() == a.block()
    assert write_snapshot(tmp_path / "b.json", b, round=2)["digest"] == snap["digest"]
    assert read_snapshot(tmp_path / "b.json", "dynamic_cheatsheet")["state"]["rejected"][0]["batch"] == 1
    with pytest.raises(Exception, match="expected 'ace_playbook'"):
        read_snapshot(tmp_path / "a.json", "ace_playbook")
    assert json.loads((tmp_path / "a.json").read_text())["kind"] == "dynamic_cheatsheet"
