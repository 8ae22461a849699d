"""The frozen calibrator in a full rollout (section 6.2) on ScienceWorld and the loopback
endpoint: its experience is rendered beside its source transition and persists in every
later actor prompt; NOUPDATE leaves the history as Raw would have it; the reviewer sees the
raw history through the latest action and its observation, never a reward or a later action."""

from __future__ import annotations

import asyncio
import json
import re

import pandas as pd
import pytest

from memtrials.llm import read_records
from memtrials.seeds import seed_of
from memtrials.studies.history.calibrator.rollouts import calibrator_rollouts, calibrator_settings
from memtrials.studies.history.design import actor_settings
from memtrials.studies.history.rollouts import rollout_cell
from tests.conftest import REPO

TASK = "find-non-living-thing:0"
HP = str(REPO / "config/prompts/actor")
CP = str(REPO / "config/prompts/calibrator")
ACTOR = {"mode": "choice", "max_actions": 5, "max_output_tokens": 32, "max_listed_actions": 8,
         "review_max_tokens": 64}
NOTE = "Focusing needs the object in view first."


def policy(body) -> str:
    msgs = body.get("messages") or []
    if msgs and "calibrating your own prior interaction history" in str(msgs[0].get("content", "")):
        n = len(re.findall(r"^\[Observation \d+:", str(msgs[-1]["content"]), flags=re.M))
        if n == 2:   # the review of the second transition writes an experience, the others do not
            return json.dumps({"decision": "CALIBRATE", "experience": NOTE})
        return '{"decision":"NOUPDATE","experience":null}'
    fmt = body.get("response_format") or {}
    enum = (((fmt.get("json_schema") or {}).get("schema") or {}).get("properties") or {}).get("answer", {}).get("enum")
    return json.dumps({"answer": enum[1]}) if enum else "look around"


@pytest.fixture(scope="module")
def engine():
    from memtrials.envs.scienceworld.env import ScienceWorldEnv

    env = ScienceWorldEnv()
    yield env
    env.close()


class _Kept:
    def __init__(self, env):
        self._env = env

    def __getattr__(self, name):
        return getattr(self._env, name)

    def close(self):
        pass


@pytest.mark.slow
def test_calibrator_experience_beside_its_transition_persists_and_noupdate_changes_nothing(
        loopback, make_config, tmp_path, engine):
    srv = loopback(policy=policy)
    cfg = make_config(srv)
    tasks = tmp_path / "tasks.parquet"
    pd.DataFrame({"task_id": [TASK], "split": ["test"], "type": ["find"]}).to_parquet(tasks)
    cell = {"tasks_per_cell": 1, "split": "test", "seed": 0, "actor": ACTOR, "shuffle": "per_step",
            "in_flight": 1, "env_options": {}}
    out = {k: str(tmp_path / f"cal{x}.parquet") for k, x in (("ep", ""), ("steps", ".steps"), ("calls", ".calls"))}
    asyncio.run(calibrator_rollouts(cfg, model="loop", env="scienceworld", cell=cell, calibrator="loop",
                                    actor_prompts_dir=HP, tasks_path=str(tasks), out_episodes=out["ep"],
                                    out_steps=out["steps"], out_calls=out["calls"], make_env=lambda: _Kept(engine)))
    raw = {k: str(tmp_path / f"raw{x}.parquet") for k, x in (("ep", ""), ("steps", ".steps"), ("calls", ".calls"))}
    asyncio.run(rollout_cell(cfg, model="loop", env="scienceworld", condition="raw", tasks=[TASK],
                             seeds=[seed_of(0, "scienceworld", TASK)], settings=actor_settings("loop", "raw", ACTOR),
                             actor_prompts_dir=HP, in_flight=1, out_episodes=raw["ep"], out_steps=raw["steps"],
                             out_calls=raw["calls"], make_env=lambda: _Kept(engine)))
    steps = pd.read_parquet(out["steps"]).sort_values("step")
    calls = read_records(out["calls"]).to_pandas().set_index("call_id")
    rsteps = pd.read_parquet(raw["steps"]).sort_values("step")
    rcalls = read_records(raw["calls"]).to_pandas().set_index("call_id")
    assert len(steps) == 5 and calibrator_settings("loop", "loop", ACTOR).review_model == "loop"

    def prompt(cs, cid):
        return json.loads(cs.loc[cid, "messages"])[-1]["content"]

    assert list(steps["review_decision"].fillna("none")) == ["NOUPDATE", "CALIBRATE", "NOUPDATE", "NOUPDATE", "none"]
    assert steps["experience"].iloc[1] == NOTE
    a2 = steps["action"].iloc[1]
    line = f"Action 2: '{a2}']\n[Experience derived from Action 2 -> its returned observation: {NOTE}]\n"
    for k in (2, 3, 4):   # steps 3, 4, 5: beside its transition, in every later prompt
        text = prompt(calls, steps["call_id"].iloc[k])
        assert line in text and text.count("Experience derived") == 1
        if k > 2:         # and before the next recorded transition
            assert line + "[Observation 3:" in text
    # NOUPDATE after step 1: the step-2 prompt is exactly Raw's
    assert prompt(calls, steps["call_id"].iloc[1]) == prompt(rcalls, rsteps["call_id"].iloc[1])
    assert "Experience derived" not in prompt(calls, steps["call_id"].iloc[1])
    # the reviewer: raw history through A_t and O_{t+1}, no reward or score, no later action, no experience
    for t, cid in zip(steps["step"], steps["review_call_id"]):
        if not isinstance(cid, str):   # the last (terminal) step has no review
            continue
        text = "\n".join(m["content"] for m in json.loads(calls.loc[cid, "messages"]))
        assert f"Latest completed action: {steps.set_index('step').loc[t, 'action']}" in text
        assert f"[Observation {t + 1}:" not in text and f"Action {t + 1}:" not in text
        assert "reward" not in text.lower() and "score" not in text.lower()
        assert "Experience derived" not in text

    # the joint actor's data (section 6.4 / G.3) from these rollouts, treated as successful
    from memtrials.studies.history.calibrator.joint import write_joint_data

    for paths in (out, raw):
        e = pd.read_parquet(paths["ep"])
        e["won"] = True
        e.to_parquet(paths["ep"])
    jp, ap = tmp_path / "joint.jsonl", tmp_path / "action.jsonl"
    assert write_joint_data(calibrator_rollouts=[out["ep"]], raw_rollouts=[raw["ep"]], out_joint=str(jp),
                            out_action_only=str(ap), actor_prompts_dir=HP,
                            calibrator_prompts_dir=CP) == (5, 5)
    joint = [json.loads(x) for x in jp.read_text().splitlines()]
    action = [json.loads(x) for x in ap.read_text().splitlines()]
    acts = list(steps["action"])
    noupdate = '<calibration>{"decision":"NOUPDATE","experience":null}</calibration>'
    assert joint[0]["target"] == noupdate + f"<action>{acts[0]}</action>"      # the first step: NOUPDATE
    assert joint[2]["target"] == ('<calibration>{"decision":"CALIBRATE","experience":"' + NOTE + '"}</calibration>'
                                  + f"<action>{acts[2]}</action>")           # reviews transition 2
    assert joint[3]["target"].startswith(noupdate)
    # the joint prompt is the rollout's, with the joint reply instruction, and without the experience
    # that its own target writes (it shows from the next step on)
    choice, joint_instr = (open(f"{d}/{f}").read().rstrip("\n") for d, f in
                           ((HP, "respond_choice.txt"), (CP, "respond_joint.txt")))
    exp_line = f"\n[Experience derived from Action 2 -> its returned observation: {NOTE}]"
    assert joint[2]["prompt"][-1]["content"] == \
        prompt(calls, steps["call_id"].iloc[2]).replace(exp_line, "").replace(choice, joint_instr)
    assert joint[3]["prompt"][-1]["content"] == \
        prompt(calls, steps["call_id"].iloc[3]).replace(choice, joint_instr)
    assert [a["target"] for a in action] == [f"<action>{x}</action>" for x in rsteps["action"]]
    assert action[1]["prompt"][-1]["content"] == prompt(rcalls, rsteps["call_id"].iloc[1]).replace(
        choice, open(CP + "/respond_action_only.txt").read().rstrip("\n"))
