"""Reference continuation and the repetition probe on real ScienceWorld episodes (loopback endpoint),
on the session's two shared engines (tests/history/conftest.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pandas as pd
import pytest

from memtrials.agent.render import render_block
from memtrials.agent.views import Entry, raw, reference
from memtrials.llm import read_records
from memtrials.seeds import seed_of
from memtrials.studies.history.continuation import continuation_cell, select_sources
from memtrials.studies.history.design import actor_settings
from memtrials.studies.history.probe import probe_cell, select_pairs
from memtrials.studies.history.rollouts import rollout_cell

from .helpers import is_judge, is_review, wrap
from .test_agent_loop import PROMPTS

JUDGE_PROMPTS = str(Path(__file__).resolve().parents[2] / "config" / "prompts" / "history")

TASK = "find-non-living-thing:0"


def raw_source(cfg, out: Path, max_actions: int, make, tasks=(TASK,)):
    s = actor_settings("loop", "raw", {"mode": "choice", "max_actions": max_actions, "max_output_tokens": 64})
    asyncio.run(rollout_cell(
        cfg, model="loop", env="scienceworld", condition="raw", tasks=list(tasks),
        seeds=[seed_of(0, "scienceworld", t) for t in tasks], settings=s, actor_prompts_dir=PROMPTS, in_flight=1,
        out_episodes=str(out / "raw.parquet"), out_steps=str(out / "raw.steps.parquet"),
        out_calls=str(out / "raw.calls.parquet"), make_env=make))
    return s


def continue_(cfg, out: Path, condition: str, s, make, calibrator=None):
    asyncio.run(continuation_cell(
        cfg, model="loop", env="scienceworld", condition=condition, episodes_path=str(out / "raw.parquet"),
        steps_path=str(out / "raw.steps.parquet"), n_sources=5, seed=0, settings=s, actor_prompts_dir=PROMPTS,
        in_flight=1, out_episodes=str(out / f"cont_{condition}.parquet"), out_steps=str(out / f"cont_{condition}.steps.parquet"),
        out_calls=str(out / f"cont_{condition}.calls.parquet"), calibrator=calibrator, make_env=make))
    return (pd.read_parquet(out / f"cont_{condition}.parquet"), pd.read_parquet(out / f"cont_{condition}.steps.parquet"),
            read_records(out / f"cont_{condition}.calls.parquet").to_pandas())


def first_prompt(steps, calls) -> str:
    cid = steps.sort_values("step")["call_id"].iloc[0]
    return json.loads(calls.set_index("call_id").loc[cid, "messages"])[-1]["content"]


@pytest.mark.slow
def test_reference_continuation_restores_state_and_shows_exactly_the_middle_third(loopback, make_config, tmp_path,
                                                                                   sw_make):
    srv = loopback(policy={"random": 7})
    cfg = make_config(srv)
    s = raw_source(cfg, tmp_path, max_actions=9, make=sw_make())
    src_eps = pd.read_parquet(tmp_path / "raw.parquet")
    src_steps = pd.read_parquet(tmp_path / "raw.steps.parquet").sort_values("step")
    assert not src_eps["won"].any() and list(src_eps["n_steps"]) == [9]
    (source,) = select_sources(src_eps, src_steps, 5, 0)
    assert (source.length, source.k, source.m) == (9, 3, 6)
    cont_s = actor_settings("loop", "raw", {"mode": "choice", "max_actions": 4, "max_output_tokens": 64})
    eps, steps, calls = continue_(cfg, tmp_path, "reference", cont_s, sw_make())
    assert list(eps["restored_step"]) == [3] and list(eps["reference_end"]) == [6]
    # the restored state is exactly the recorded state after action k = 3
    first = steps.sort_values("step").iloc[0]
    assert first["step"] == 4 and first["obs_before"] == src_steps["observation"].iloc[2]
    # the reference block holds exactly records k+1..m (actions 4-6, observations 4-7)
    text = first_prompt(steps, calls)
    head = "was restored to step 3):\n"
    block = text[text.index(head) + len(head): text.index("\nEnd of additional reference history.")]
    st = src_steps.set_index("step")
    expected = [Entry(st.loc[t, "obs_before"], st.loc[t, "action"]) for t in (4, 5, 6)]
    # numbered 1..3 and labelled apart from the executed steps (Appendix D.6)
    assert block == render_block(reference(expected, st.loc[6, "observation"], restored_step=3))
    assert block.split("\n")[0].startswith("[Reference Observation 1: ")
    # the prefix is the actual history through step 3, then no continuation yet
    assert render_block(raw([Entry(st.loc[t, "obs_before"], st.loc[t, "action"]) for t in (1, 2, 3)])) in text
    assert "Actual interaction history after restoring the environment to step 3:\nNone\n" in text

    raw_eps, raw_steps, raw_calls = continue_(cfg, tmp_path, "raw", cont_s, sw_make())
    raw_text = first_prompt(raw_steps, raw_calls)
    assert "Additional reference history" not in raw_text
    assert raw_eps["first_prompt_tokens"].iloc[0] < eps["first_prompt_tokens"].iloc[0]

    c_eps, c_steps, c_calls = continue_(cfg, tmp_path, "causal_reference", cont_s, sw_make())
    c_text = first_prompt(c_steps, c_calls)
    assert "[Outcome of Action 3: " in c_text and "Reference Action 1: '" in c_text
    assert "[Outcome of Reference Action 3: " in c_text and "Reference Action 4" not in c_text


@pytest.mark.slow
def test_experience_and_calibrator_continuations(loopback, make_config, tmp_path, sw_make):
    def policy(body):
        if is_review(body):
            return '{"decision":"CALIBRATE","experience":"The kitchen door is closed."}'
        return wrap(body, "look around")

    srv = loopback(policy=policy)
    cfg = make_config(srv)
    raw_source(cfg, tmp_path, max_actions=6, make=sw_make())
    cont_s = actor_settings("loop", "raw", {"mode": "choice", "max_actions": 3, "max_output_tokens": 64})
    eps, steps, calls = continue_(cfg, tmp_path, "experience", cont_s, sw_make())
    assert list(eps["resume_experience"]) == ["The kitchen door is closed."]
    assert (calls["purpose"] == "review").sum() == 1  # generated once, at resumption
    # it reviews what was executed in the restored environment: A_k -> O_{k+1} (L = 6, k = 2)
    src = pd.read_parquet(tmp_path / "raw.steps.parquet").set_index("step")
    review = json.loads(calls[calls["purpose"] == "review"]["messages"].iloc[0])[-1]["content"]
    assert review.endswith(f"Latest completed action: {src.loc[2, 'action']}\n"
                           f"Returned observation: {src.loc[2, 'observation']}")
    text = first_prompt(steps, calls)
    exp_line = "[Experience derived from Action 2 -> its returned observation: The kitchen door is closed.]"
    assert text.index(exp_line) < text.index("Additional reference history")  # beside transition k, not inside
    assert "actions you took" not in text
    k_eps, k_steps, k_calls = continue_(cfg, tmp_path, "calibrator", cont_s, sw_make(), calibrator="loop")
    assert int(k_eps["n_reviews"].iloc[0]) == 2  # after each non-terminal continuation transition
    assert list(k_eps["calibrator"]) == ["loop"] and eps["calibrator"].isna().all()  # the endpoint in the role
    with pytest.raises(ValueError, match="roles.calibrator"):
        continue_(cfg, tmp_path, "calibrator", cont_s, sw_make())


@pytest.mark.slow
def test_repetition_probe_selects_earliest_pair_and_shares_histories(loopback, make_config, tmp_path, sw_make):
    calls_seen = {"judge": 0}

    def policy(body):
        if is_judge(body):
            calls_seen["judge"] += 1
            return '{"supports_repetition": false}'
        if is_review(body):
            return '{"decision":"CALIBRATE","experience":"Looking again shows nothing new."}'
        return wrap(body, "look around")

    srv = loopback(policy=policy)
    cfg = make_config(srv)
    tasks = (TASK, "lifespan-longest-lived:0")
    s = raw_source(cfg, tmp_path, max_actions=5, make=sw_make(), tasks=tasks)
    pairs = select_pairs(pd.read_parquet(tmp_path / "raw.parquet"), pd.read_parquet(tmp_path / "raw.steps.parquet"))
    assert [p.step for p in pairs] == [1, 1] and all(len(p.entries) == 2 for p in pairs)
    resp = asyncio.run(probe_cell(
        cfg, model="loop", judge="loop", env="scienceworld", episodes_path=str(tmp_path / "raw.parquet"),
        steps_path=str(tmp_path / "raw.steps.parquet"), settings=s, actor_prompts_dir=PROMPTS,
        prompts_dir=JUDGE_PROMPTS, out_responses=str(tmp_path / "probe.parquet"), out_screen=str(tmp_path / "screen.parquet"),
        out_calls=str(tmp_path / "probe.calls.parquet")))
    assert calls_seen["judge"] == 2
    assert resp.groupby("condition")["episode_id"].nunique().to_dict() == {"raw": 2, "causal": 2, "experience": 2}
    assert resp["repeated"].all()
    exp = resp[resp["condition"] == "experience"]
    assert (exp["review_decision"] == "CALIBRATE").all()
    calls = read_records(tmp_path / "probe.calls.parquet").to_pandas().set_index("call_id")
    causal_prompt = json.loads(calls.loc[resp[resp["condition"] == "causal"]["call_id"].iloc[0], "messages"])
    assert "[Outcome of Action 1: " in causal_prompt[-1]["content"]
    exp_prompt = json.loads(calls.loc[exp["call_id"].iloc[0], "messages"])[-1]["content"]
    assert "[Experience derived from Action 2 -> its returned observation: Looking again" in exp_prompt


def test_select_pairs_skips_terminal_and_budget_end_pairs():
    eps = pd.DataFrame([{"episode_id": "e", "task_id": "t", "task": "x", "task_index": 0}])

    def steps(actions, done_at=None):
        return pd.DataFrame([{"episode_id": "e", "step": i + 1, "action": a, "obs_before": f"O{i + 1}",
                              "done": done_at == i + 1, "shown_actions": json.dumps(["a", "b"]),
                              "n_admissible": 2} for i, a in enumerate(actions)])

    assert select_pairs(eps, steps(["a", "b", "b", "a"]))[0].step == 2
    assert select_pairs(eps, steps(["a", "b", "b"])) == []          # no next step: budget end
    assert select_pairs(eps, steps(["b", "b", "c"], done_at=2)) == []  # the repeat ended the episode


def test_select_pairs_on_a_code_environments_steps_read_back_from_parquet(tmp_path):
    """AppWorld lists no actions: shown_actions is null, which Parquet gives back as NaN
    (pandas' string dtype), not None; the pair still counts, with no listing."""
    import pyarrow as pa

    from memtrials.agent.records import STEP_SCHEMA
    from memtrials.io import write_parquet

    eps = pd.DataFrame([{"episode_id": "e", "task_id": "t", "task": "x", "task_index": 0}])
    rows = [{"episode_id": "e", "task_id": "t", "step": i + 1, "action": a, "obs_before": f"O{i + 1}",
             "done": False, "shown_actions": None, "n_admissible": -1} for i, a in enumerate(["a", "a", "b"])]
    table = pa.Table.from_pylist([{f.name: r.get(f.name) for f in STEP_SCHEMA} for r in rows], schema=STEP_SCHEMA)
    write_parquet(table, tmp_path / "s.parquet")
    pairs = select_pairs(eps, pd.read_parquet(tmp_path / "s.parquet"))
    assert [(p.step, p.shown_actions, p.admissible_count) for p in pairs] == [(1, None, -1)]
