"""Anti-persistence memory on the loopback endpoint: each mode's retrieval and synthesis,
corrective empty without a failure, no guidance text kept (no abstraction store) unless
persisted, evaluation leaves the memory unchanged, snapshots round-trip, and a real
ScienceWorld stream whose rotation, prompts and outcome log are checked."""

from __future__ import annotations

import json
import re

import pytest

from memtrials.agent.actor import Episode
from memtrials.memory.antipersist import EPISODE_COLUMNS, MODES, PERSIST_COLUMNS, AntiPersistenceMemory
from memtrials.memory.snapshot import restore, write_snapshot
from memtrials.stats.bandit import FixedPolicy, KNNBandit
from memtrials.testing.policies import first_admissible

from .helpers import calls, config, episode, update
from .test_trajectory import first_prompt, serve, stream

HELP = "You help an agent"
SYSTEM_OF = {"imitation": "action patterns", "strategic": "subgoals", "corrective": "Do not X, because Y"}


def policy(body):
    """Synthesis calls answer a guidance line naming the mode and the task; the actor takes the
    first admissible action."""
    msgs = body["messages"]
    if msgs[0]["content"].startswith(HELP):
        mode = next(m for m, key in SYSTEM_OF.items() if key in msgs[0]["content"])
        task = msgs[-1]["content"].splitlines()[0].removeprefix("Current task: ")
        return f"- GUIDANCE[{mode}] for {task}"
    return first_admissible(body)


def served(eid: str, task: str, won: bool, mode: str = "none", calls_made: int = 0, guidance: str = "") -> Episode:
    """An episode as the runner returns it after this memory served it (its columns in the summary)."""
    ep = episode(eid, task, won=won)
    ep.summary.update({"mode": mode, "synthesis_calls": calls_made, "guidance": guidance})
    return ep


def memory(mode: str | None = None, **kw) -> AntiPersistenceMemory:
    sel = {"policy": "fixed", "arm": mode} if mode else kw.pop("selector", None)
    return AntiPersistenceMemory(synthesizer="loop", embedder="emb", selector=sel, **kw)


def with_state(mode: str, state, **kw) -> AntiPersistenceMemory:
    m = memory(mode, **kw)
    m.load(state)
    return m


def synthesis_calls(path):
    return [r for r in calls(path) if r["purpose"] == "antipersist_synthesis"]


@pytest.fixture
def stocked(loopback, tmp_path):
    """A loopback config and the state of a memory holding 3 successes and 4 failures."""
    srv = loopback(policy=policy, embed_dim=64)
    cfg = config(tmp_path, srv)
    m = memory("none")
    eps = [served(f"w{i}", f"win task {i}", True) for i in range(3)] + \
          [served(f"f{i}", f"fail task {i}", False) for i in range(4)]
    update(cfg, m, [eps], tmp_path / "stock.parquet")
    return cfg, m.state()


def test_none_serves_retrieved_trajectories_without_a_call(stocked, tmp_path):
    cfg, state = stocked
    ep = serve(cfg, with_state("none", state).frozen(), "fail task 2", "q", records=tmp_path / "q.parquet")
    block = ep.at_step(None).block
    assert len(block.ids) == 5 and block.ids[0] == "T00006"  # fail task 2, cosine 1, then the rest by cosine
    assert block.render().startswith("Earlier attempts at similar tasks:\n\n[T00006] Task: fail task 2\n")
    c = ep.columns
    assert (c["mode"], c["synthesis_calls"], c["synthesis_status"], c["mode_reason"]) == (
        "none", 0, "not_needed", "fixed")
    assert synthesis_calls(tmp_path / "q.parquet") == [] and set(c) == {f.name for f in EPISODE_COLUMNS}


@pytest.mark.parametrize("mode", ["imitation", "strategic"])
def test_imitation_and_strategic_build_guidance_from_successes(stocked, tmp_path, mode):
    cfg, state = stocked
    ep = serve(cfg, with_state(mode, state).frozen(), "win task 1", "q", records=tmp_path / "q.parquet")
    [call] = synthesis_calls(tmp_path / "q.parquet")
    system, user = call["messages"][0]["content"], call["messages"][-1]["content"]
    assert SYSTEM_OF[mode] in system and not system.startswith("<!--")
    assert user.startswith("Current task: win task 1\n\nEarlier attempts at similar tasks (3):\n\n"
                           "[T00002] Task: win task 1")
    assert user.count("Outcome: succeeded") == 3 and "Outcome: failed" not in user
    block = ep.at_step(None).block
    assert block.render() == f"Guidance for this task:\n- GUIDANCE[{mode}] for win task 1\n"
    assert block.ids[0] == "T00002" and sorted(block.ids) == ["T00001", "T00002", "T00003"]
    c = ep.columns
    assert (c["synthesis_calls"], c["synthesis_status"], c["guidance_chars"]) == (1, "ok", len(block.render()) - 25)
    assert [x["id"] for x in json.loads(c["retrieval"])] == list(block.ids)


def test_corrective_reads_failures_and_one_contrasting_success(stocked, tmp_path):
    cfg, state = stocked
    ep = serve(cfg, with_state("corrective", state).frozen(), "fail task 0", "q", records=tmp_path / "q.parquet")
    [call] = synthesis_calls(tmp_path / "q.parquet")
    user = call["messages"][-1]["content"]
    assert "(5):" in user and user.count("Outcome: failed") == 4 and user.count("Outcome: succeeded") == 1
    assert user.index("Outcome: succeeded") > user.rindex("Outcome: failed")  # the contrast comes last
    assert "[T00004] Task: fail task 0" in user.split("\n\n")[2]  # the most similar failure first
    block = ep.at_step(None).block
    assert block.ids[:4] == ("T00004",) + block.ids[1:4] and set(block.ids[:4]) == {"T00004", "T00005", "T00006",
                                                                                     "T00007"}
    assert block.ids[4] in {"T00001", "T00002", "T00003"}
    assert "GUIDANCE[corrective] for fail task 0" in block.render()
    # k = 3: two failures and the contrast
    m = with_state("corrective", state, k=3)
    assert len(serve(cfg, m.frozen(), "fail task 0", "q2").at_step(None).block.ids) == 3
    # k = 1: the most similar failure alone (a contrast would leave no failure)
    assert serve(cfg, with_state("corrective", state, k=1).frozen(), "fail task 0", "q3").at_step(None).block.ids \
        == ("T00004",)


def test_corrective_returns_empty_without_a_failure_and_is_credited(loopback, tmp_path):
    srv = loopback(policy=policy, embed_dim=32)
    cfg = config(tmp_path, srv)
    m = memory("corrective")
    update(cfg, m, [[served("w0", "win task", True, "corrective")]], tmp_path / "a.parquet")
    ep = serve(cfg, m.frozen(), "another task", "q", records=tmp_path / "q.parquet")
    assert ep.at_step(None).block is None and synthesis_calls(tmp_path / "q.parquet") == []
    c = ep.columns
    assert (c["mode"], c["synthesis_calls"], c["synthesis_status"]) == ("corrective", 0, "no_failure")
    # the episode it serves is credited to corrective at no call cost, not to another mode
    out = served("q", "another task", True, "corrective", c["synthesis_calls"])
    update(cfg, m, [[out]], tmp_path / "b.parquet")
    assert m.outcome_log[-1] == {"key": "q", "arm": "corrective", "success": True, "extra_calls": 0,
                                      "reward": 1.0, "round": None, "trajectory": "T00002", "task_id": "another task"}
    # imitation and strategic with no success on hand: nothing served, no call
    f = memory("imitation")
    update(cfg, f, [[served("f0", "fail task", False)]], tmp_path / "c.parquet")
    e2 = serve(cfg, f.frozen(), "fail task", "q3", records=tmp_path / "q3.parquet")
    assert e2.at_step(None).block is None and e2.columns["synthesis_status"] == "no_success"
    assert synthesis_calls(tmp_path / "q3.parquet") == []


def test_no_guidance_is_kept_unless_persisted(stocked, tmp_path):
    cfg, state = stocked
    m = with_state("strategic", state)
    view = m.frozen()
    ep = serve(cfg, view, "win task 0", "e8")
    assert "guidance" not in ep.columns  # the discard variant never carries the text out of the episode
    update(cfg, m, [[served("e8", "win task 0", True, "strategic", 1)]], tmp_path / "u.parquet")
    dumped = json.dumps(m.state())
    assert "GUIDANCE" not in dumped and m.state()["kept"] == [] and m.kind == "antipersistence"
    assert m.outcome_log[-1]["reward"] == pytest.approx(0.95) and set(m.outcome_log[-1]) == {
        "key", "arm", "success", "extra_calls", "reward", "round", "trajectory", "task_id"}
    # the persisted variant keeps the same text and serves it to a later, similar task
    p = with_state("strategic", state, persist=True)
    assert p.kind == "antipersistence_persist" and p.episode_columns == PERSIST_COLUMNS
    first = serve(cfg, p.frozen(), "win task 0", "e8")
    text = first.columns["guidance"]
    assert text == "- GUIDANCE[strategic] for win task 0"
    update(cfg, p, [[served("e8", "win task 0", True, "strategic", 1, text)]], tmp_path / "p.parquet")
    assert [(x["id"], x["text"]) for x in p.kept] == [("G00001", text)]
    later = serve(cfg, p.frozen(), "win task 0", "e9").at_step(None).block
    assert later.render() == (f"Guidance for this task:\n- GUIDANCE[strategic] for win task 0\n"
                              f"Guidance kept from earlier tasks:\n- {text}\n")
    assert later.ids[-1] == "G00001"


def test_evaluation_leaves_it_unchanged_and_snapshots_round_trip(stocked, tmp_path):
    cfg, state = stocked
    rounds = [[f"w{i}" for i in range(3)] + [f"f{i}" for i in range(4)]]
    m = memory(selector={"seed": 4}, rounds=rounds)
    m.load(state)
    before = json.dumps(m.state(), sort_keys=True)
    view = m.frozen()
    evals = [serve(cfg, view, f"held-out task {i}", f"eval/{i}") for i in range(6)]
    assert json.dumps(m.state(), sort_keys=True) == before  # evaluation changed nothing
    assert {e.columns["mode_reason"] for e in evals} <= {"explore", "neighbours", "fallback"}  # past the rotation
    snap = write_snapshot(tmp_path / "s.json", m)
    other = memory(selector={"seed": 4}, rounds=rounds)
    restore(other, tmp_path / "s.json")
    assert write_snapshot(tmp_path / "t.json", other)["digest"] == snap["digest"]
    again = [serve(cfg, other.frozen(), f"held-out task {i}", f"eval/{i}") for i in range(6)]
    assert [e.columns for e in again] == [e.columns for e in evals]
    assert [e.at_step(None).block for e in again] == [e.at_step(None).block for e in evals]
    # an episode this memory did not serve cannot enter its update
    with pytest.raises(ValueError, match="carries no 'mode' column"):
        update(cfg, m, [[episode("x", "t")]], tmp_path / "x.parquet")


def test_selector_settings_and_errors():
    assert isinstance(memory().selector, KNNBandit) and memory().selector.arms == MODES
    m = memory(selector={"policy": "fixed", "arm": "strategic"})
    assert isinstance(m.selector, FixedPolicy) and m.state()["settings"]["selector"]["arm"] == "strategic"
    assert memory(selector=KNNBandit(MODES, gamma=0.99)).selector.gamma == 0.99
    with pytest.raises(ValueError, match="its arms must be"):
        memory(selector=KNNBandit(("a", "b")))
    with pytest.raises(ValueError, match="appears twice"):
        memory(rounds=[["e1", "e2"], ["e1"]])
    with pytest.raises(ValueError, match="unknown key"):
        memory(selector={"gamma": 0.9, "lambda": 0.1})


def test_a_training_episode_outside_the_plan_is_logged_with_a_warning(loopback, tmp_path, caplog):
    srv = loopback(policy=policy, embed_dim=32)
    cfg = config(tmp_path, srv)
    m = memory(round_size=2, rounds=[["p0"]])
    with caplog.at_level("WARNING", logger="memtrials.memory.antipersist"):
        update(cfg, m, [[served("p0", "a", False), served("x1", "b", True), served("x2", "c", True)]],
               tmp_path / "a.parquet")
    assert [e["round"] for e in m.outcome_log] == [0, 0, 1]  # planned; then len(log) // round_size
    warned = [r for r in caplog.records if "not in the rounds plan" in r.getMessage()]
    assert len(warned) == 1 and "'x1'" in warned[0].getMessage()


@pytest.mark.slow
def test_a_stream_rotates_modes_and_logs_outcomes_without_guidance(loopback, tmp_path):
    """ScienceWorld, B = 2, one rotation round of four episodes: modes none, imitation,
    strategic, corrective in turn; the corrective episode (failures on hand) is served this
    task's guidance, built from earlier failures; the log keeps mode, success and reward."""
    from tests.agent.stream_cell import specs

    srv = loopback(policy=policy, embed_dim=64)
    m = AntiPersistenceMemory(synthesizer="loop", embedder="emb", rounds=[specs(4)])  # the plan as specs
    eps, steps, rec, states = stream(tmp_path, srv, m)
    modes = [e.summary["mode"] for e in eps]
    assert modes == list(MODES) and {e.summary["mode_reason"] for e in eps} == {"rotation"}
    assert [len(s["outcome_log"]) for s in states] == [2, 4] and all(s["kept"] == [] for s in states)
    assert not any(e.summary["won"] for e in eps)  # two actions never finish these tasks
    statuses = [e.summary["synthesis_status"] for e in eps]
    assert statuses == ["not_needed", "no_success", "no_success", "ok"]
    log = m.outcome_log
    assert [(x["arm"], x["success"], x["extra_calls"], x["reward"]) for x in log] == [
        ("none", False, 0, 0.0), ("imitation", False, 0, 0.0), ("strategic", False, 0, 0.0),
        ("corrective", False, 1, pytest.approx(-0.05))]
    assert [x["trajectory"] for x in log] == ["T00001", "T00002", "T00003", "T00004"]
    # the corrective episode's prompts carry the guidance built for its task from batch 0's failures
    last = eps[3].summary
    prompt = first_prompt(steps, rec, last["episode_id"])
    assert f"Guidance for this task:\n- GUIDANCE[corrective] for {last['task']}\n" in prompt
    synth = rec[rec["purpose"] == "antipersist_synthesis"]
    assert len(synth) == 1
    user = synth.iloc[0]["messages"][-1]["content"]
    assert sorted(re.findall(r"^\[(T\d{5})\]", user, re.MULTILINE)) == ["T00001", "T00002"]
    assert user.count("Outcome: failed") == 2
    g = steps[steps["episode_id"] == last["episode_id"]]
    assert all(sorted(json.loads(x)) == ["T00001", "T00002"] for x in g["memory_ids"])
    # nothing of the guidance survives in the memory
    assert "GUIDANCE" not in json.dumps(states[-1]) and "GUIDANCE" not in json.dumps(m.state())
    # mode none met an empty store: nothing served; no success on hand: nothing served
    for e in eps[:3]:
        assert "Earlier attempts" not in first_prompt(steps, rec, e.summary["episode_id"])
        assert "Guidance" not in first_prompt(steps, rec, e.summary["episode_id"])
