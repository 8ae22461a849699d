"""The calibrator's label chain (section 6.1, Appendix D.4) on the loopback endpoint with a
scripted generator, judge and actor: identical actions tie without a judge call (counted in
the call records), an order-inconsistent judgement is a tie, a failed screen and a direct
NOUPDATE become NOUPDATE targets, and q(E) with the target rule on every combination."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import pandas as pd
import pytest

from memtrials.agent.prompts import parse_review
from memtrials.agent.records import table
from memtrials.agent.views import Entry
from memtrials.io import write_parquet
from memtrials.llm import read_records
from memtrials.studies.history.calibrator import dataset, labels
from memtrials.studies.history.calibrator.compare import compare_stage
from memtrials.studies.history.calibrator.contexts import Context
from memtrials.studies.history.calibrator.generate import generate_stage
from memtrials.studies.history.calibrator.schemas import CONTEXT_SCHEMA
from memtrials.studies.history.calibrator.screen import screen_stage

REPO = Path(__file__).resolve().parents[2]
HP = str(REPO / "config/prompts/actor")
CP = str(REPO / "config/prompts/calibrator")
TASKS = ["task-same", "task-win", "task-bias", "task-loss", "task-screenfail", "task-noupdate"]
ACTIONS = ["look", "go north", "go south"]
ACTOR = {"mode": "choice", "max_output_tokens": 32}


def _text(body) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages") or [])


def _task(text: str) -> str:
    return next(t for t in sorted(TASKS, key=len, reverse=True) if f"Task: {t}" in text or t in text)


def scripted(body) -> str:
    """Generator, screen, judge and actor in one endpoint, told apart by their system text."""
    msgs = body.get("messages") or []
    first, text = str(msgs[0].get("content", "")), _text(body)
    task = _task(text)
    if "calibrating your own prior interaction history" in first:           # the G.2 review
        if task == "task-noupdate":
            return '{"decision":"NOUPDATE","experience":null}'
        return json.dumps({"decision": "CALIBRATE", "experience": f"Lesson for {task}."})
    if first.startswith("You check a candidate experience"):                # the content screen
        return json.dumps({"unsupported": task == "task-screenfail", "restates_observation": False})
    if first.startswith("You compare two candidate next actions"):          # the blind comparison
        user = str(msgs[-1]["content"])
        a = user.split("Candidate action A:\n")[1].split("\n")[0]
        if task == "task-bias":
            return '{"better": "A"}'                                        # position bias: inconsistent
        good = "go north" if task == "task-win" else "look"
        return json.dumps({"better": "A" if a == good else "B"})
    # an actor: "go north" when an experience stands beside the latest transition, except task-same
    act = "go north" if ("[Experience derived from" in text and task != "task-same") else "look"
    return json.dumps({"answer": act})


def contexts() -> list[Context]:
    out = []
    for i, t in enumerate(TASKS):
        hist = (Entry("You are in a hallway.", "look"), Entry("You see a door.", "go south"))
        out.append(Context(f"loop/scienceworld/{t}/2", "loop", "scienceworld", t, f"ep/{t}", t, 2, hist,
                           "go south", f"Observation {i}: nothing happens.", tuple(ACTIONS)))
    return out


@pytest.fixture
def chain(loopback, make_config, tmp_path):
    srv = loopback(policy=scripted)
    cfg = make_config(srv)
    ctx = tmp_path / "contexts.parquet"
    write_parquet(table([c.row() for c in contexts()], CONTEXT_SCHEMA), ctx)
    p = {k: str(tmp_path / k) for k in ("gen", "gen_calls", "scr", "scr_calls", "cmp", "cmp_calls", "labels")}
    asyncio.run(generate_stage(cfg, generator="loop", contexts_path=str(ctx), actor_prompts_dir=HP, max_tokens=64,
                               out=p["gen"], out_calls=p["gen_calls"]))
    asyncio.run(screen_stage(cfg, judge="loop", contexts_path=str(ctx), generated_path=p["gen"], actor_prompts_dir=HP,
                             calibrator_prompts_dir=CP, max_tokens=64, out=p["scr"], out_calls=p["scr_calls"]))
    asyncio.run(compare_stage(cfg, actor="loop", judge="loop", contexts_path=str(ctx), generated_path=p["gen"],
                              screen_path=p["scr"], actor_prompts_dir=HP, calibrator_prompts_dir=CP, actor_cfg=ACTOR,
                              judge_max_tokens=64, out=p["cmp"], out_calls=p["cmp_calls"]))
    lab = dataset.write_labels(contexts_path=str(ctx), generated_path=p["gen"], screen_path=p["scr"],
                               compare_paths=[p["cmp"]], out=p["labels"])
    return {"ctx": str(ctx), "labels": lab.set_index("context_id"), "pairs": pd.read_parquet(p["cmp"]),
            "calls": read_records(p["cmp_calls"]).to_pandas(), "screen": pd.read_parquet(p["scr"]),
            "labels_path": p["labels"]}


def cid(task: str) -> str:
    return f"loop/scienceworld/{task}/2"


def test_identical_actions_tie_without_a_judge_call(chain):
    pairs, calls = chain["pairs"].set_index("context_id"), chain["calls"]
    same = pairs.loc[cid("task-same")]
    assert same["identical"] and same["outcome"] == "tie"
    assert pd.isna(same["judge_call_ab"]) and pd.isna(same["verdict_ab"])
    judged = calls[calls["purpose"] == "calibrator-compare"]
    # two judgements (A/B reversed) for each of the three changed pairs, none for the identical one
    assert len(judged) == 6
    assert not any("task-same" in m for m in judged["messages"])
    assert set(pairs.loc[~pairs["identical"]].index) == {cid(t) for t in ("task-win", "task-bias", "task-loss")}


def test_judge_is_blind_reversed_and_at_temperature_zero(chain):
    calls = chain["calls"]
    judged = calls[calls["purpose"] == "calibrator-compare"]
    for m, params in zip(judged["messages"], judged["params"]):
        assert "Lesson for" not in m and "Experience" not in m and "loop" not in m
        assert json.loads(params)["temperature"] == 0.0
    win = chain["pairs"].set_index("context_id").loc[cid("task-win")]
    order = [json.loads(calls.set_index("call_id").loc[win[k], "messages"])[-1]["content"]
             for k in ("judge_call_ab", "judge_call_ba")]
    first_a = [o.split("Candidate action A:\n")[1].split("\n")[0] for o in order]
    assert first_a == [win["action_with"], win["action_without"]]


def test_outcomes_and_targets_of_the_scripted_chain(chain):
    pairs, lab = chain["pairs"].set_index("context_id"), chain["labels"]
    assert pairs.loc[cid("task-win"), "outcome"] == "win"
    assert pairs.loc[cid("task-bias"), "outcome"] == "tie"       # order-inconsistent
    assert pairs.loc[cid("task-loss"), "outcome"] == "loss"
    expect = {"task-same": ("CALIBRATE", 0), "task-win": ("CALIBRATE", 1), "task-bias": ("CALIBRATE", 0),
              "task-loss": ("NOUPDATE", -1)}
    for t, (target, q) in expect.items():
        assert (lab.loc[cid(t), "target_full"], lab.loc[cid(t), "q"]) == (target, q), t
        assert lab.loc[cid(t), "target_screen_only"] == "CALIBRATE"
    assert lab.loc[cid("task-same"), "n_tie_no_judge"] == 1


def test_failed_screen_and_direct_noupdate_become_noupdate(chain):
    lab, pairs = chain["labels"], chain["pairs"]
    fail = lab.loc[cid("task-screenfail")]
    assert fail["decision"] == "CALIBRATE" and fail["screened"] and not fail["screen_passed"]
    assert fail["target_full"] == fail["target_screen_only"] == "NOUPDATE"
    assert cid("task-screenfail") not in set(pairs["context_id"])     # never compared
    nou = lab.loc[cid("task-noupdate")]
    assert nou["decision"] == "NOUPDATE" and not nou["screened"] and nou["target_full"] == "NOUPDATE"
    assert cid("task-noupdate") not in set(chain["screen"]["context_id"])


def test_dataset_jsonl_is_the_review_prompt_and_a_valid_g2_output(chain, tmp_path):
    exs = dataset.write_dataset(contexts_path=chain["ctx"], labels_path=chain["labels_path"], actor_prompts_dir=HP,
                                variant="full", out_jsonl=str(tmp_path / "full.jsonl"),
                                out_parquet=str(tmp_path / "full.parquet"))
    lines = [json.loads(x) for x in (tmp_path / "full.jsonl").read_text().splitlines()]
    assert len(lines) == len(exs) == len(TASKS)
    by = {x["context_id"]: x for x in lines}
    win = by[cid("task-win")]
    assert parse_review(json.loads(win["target"])) == ("CALIBRATE", "Lesson for task-win.")
    assert parse_review(json.loads(by[cid("task-loss")]["target"])) == ("NOUPDATE", None)
    assert win["prompt"][0]["content"].startswith("You are calibrating your own prior interaction history")
    assert win["messages"][-1] == {"role": "assistant", "content": win["target"]}
    # the review prompt shows the raw history: no experience, no reward
    assert "Experience derived" not in win["prompt"][1]["content"]
    assert pd.read_parquet(tmp_path / "full.parquet")["context_id"].tolist() == [x["context_id"] for x in lines]


@pytest.mark.parametrize("verdicts", list(itertools.product(["A", "B", "tie", None], repeat=2)))
def test_outcome_needs_both_orders_to_agree(verdicts):
    ab, ba = verdicts
    want = "win" if (ab, ba) == ("A", "B") else "loss" if (ab, ba) == ("B", "A") else "tie"
    assert labels.outcome(ab, ba) == want


@pytest.mark.parametrize("n_actors", [1, 2, 3, 5])
def test_q_and_target_on_every_combination(n_actors):
    for outs in itertools.product(labels.OUTCOMES, repeat=n_actors):
        up = sum(o == "win" for o in outs)
        down = sum(o == "loss" for o in outs)
        assert labels.margin(list(outs)) == (up, down, up - down)
        keep = (up - down) > 0 or down == 0
        assert labels.target(list(outs)) == ("CALIBRATE" if keep else "NOUPDATE"), outs
    with pytest.raises(ValueError, match="unknown pair outcome"):
        labels.margin(["better"])


def test_identical_means_the_same_executable_action():
    assert not labels.needs_judge("go north", "  Go   North ")
    assert labels.needs_judge("go north", "go south")
