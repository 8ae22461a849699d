"""The joint actor of section 6.4 / Appendix G.3 and its action-only baseline, on ScienceWorld
and the loopback endpoint: the actor loop parses the calibration block of each reply, puts its
experience beside the transition it reviews (and nowhere else), executes the action, records a
malformed block as INVALID and a reply without a parsable action as an invalid action; the
prompts hold no reward, score or later action, and are what :func:`actor_prompt` renders from
the recorded steps (the SFT data's prompts)."""

from __future__ import annotations

import asyncio
import json
import re

import pandas as pd
import pytest

from memtrials.agent.actor import ActorSettings
from memtrials.agent.parse import parse_calibration, parse_joint
from memtrials.agent.views import Entry
from memtrials.llm import read_records
from memtrials.studies.history.calibrator.jointactor import actor_prompt, arm_settings, joint_rollouts, load_prompts
from tests.calibrator.test_calibrator_rollouts import TASK, _Kept
from tests.conftest import REPO

HP, CP = str(REPO / "config/prompts/actor"), str(REPO / "config/prompts/calibrator")
ACTOR = {"mode": "choice", "max_actions": 5, "max_output_tokens": 32, "max_listed_actions": 8,
         "review_max_tokens": 64}
NOTE = "Opening a door reveals the next room."
NOUP = '<calibration>{"decision":"NOUPDATE","experience":null}</calibration>'


def test_the_calibration_block_is_parsed_and_malformed_ones_are_invalid():
    ok = parse_joint(f'<think>hm</think>\n<calibration>{{"decision":"CALIBRATE","experience":" {NOTE} "}}'
                     f'</calibration>\n<action>look around</action>', ["look around", "wait"])
    assert ok[0].decision == "CALIBRATE" and ok[0].experience == NOTE and ok[1].action == "look around"
    assert ok[1].status == "ok"
    assert parse_calibration(NOUP + "<action>x</action>").decision == "NOUPDATE"
    for reply, status in [("<action>wait</action>", "missing"),
                          (NOUP + NOUP + "<action>wait</action>", "multiple"),
                          ("<action>wait</action>" + NOUP, "after_action"),
                          ('<calibration>{"decision": CALIBRATE}</calibration><action>wait</action>', "not_json"),
                          ('<calibration>{"decision":"CALIBRATE","experience":null}</calibration>wait',
                           "not_an_output"),
                          ('<calibration>["NOUPDATE"]</calibration>wait', "not_an_output")]:
        cal, parsed = parse_joint(reply, ["look around", "wait"])
        assert (cal.decision, cal.experience, cal.status) == ("INVALID", None, status), reply
        assert parsed.action == "wait" and parsed.status == "ok", reply   # the action is parsed regardless
    cal, parsed = parse_joint(NOUP + "\nI am not sure\nwhat to do", ["wait"])
    assert cal.decision == "NOUPDATE" and parsed.status == "unparsable" and parsed.action == "I am not sure"
    with pytest.raises(ValueError, match="no separate review"):
        ActorSettings(model="m", mode="joint", review=True)


def _step(text: str) -> int:
    return int(re.search(r"You have already taken (\d+) step", text).group(1)) + 1


def _listed(text: str) -> list[str]:
    return re.findall(r"^- (.*)$", text.split("Admissible actions:\n", 1)[1], flags=re.M)


def joint_policy(body) -> str:
    text = body["messages"][-1]["content"]
    t, act = _step(text), f"<action>{_listed(text)[0]}</action>"
    return {1: NOUP + "\n" + act,
            2: '<calibration>{"decision":"CALIBRATE","experience":"' + NOTE + '"}</calibration>\n' + act,
            3: '<calibration>{"decision": CALIBRATE, "experience": oops}</calibration>\n' + act,
            4: NOUP + "\nI will think\nabout it",
            }.get(t, NOUP + act)


def action_policy(body) -> str:
    return f"<action>{_listed(body['messages'][-1]['content'])[-1]}</action>"


@pytest.fixture(scope="module")
def engine():
    from memtrials.envs.scienceworld.env import ScienceWorldEnv

    env = ScienceWorldEnv()
    yield env
    env.close()


def run_arm(arm, policy, loopback, make_config, tmp_path, engine, reply="constrained", **endpoint):
    cfg = make_config(loopback(policy=policy), **endpoint)
    tmp_path.mkdir(parents=True, exist_ok=True)
    tasks = tmp_path / "tasks.parquet"
    pd.DataFrame({"task_id": [TASK], "split": ["test"], "type": ["find"]}).to_parquet(tasks)
    cell = {"tasks_per_cell": 1, "split": "test", "seed": 0, "actor": ACTOR, "in_flight": 1, "env_options": {},
            "reply": reply, "max_experience_chars": 40}   # the loopback takes no grammar unless told: free replies
    out = {k: str(tmp_path / f"{arm}{x}.parquet") for k, x in (("ep", ""), ("steps", ".steps"), ("calls", ".calls"))}
    asyncio.run(joint_rollouts(cfg, arm=arm, model="loop", env="scienceworld", cell=cell, max_output_tokens=64,
                               actor_prompts_dir=HP, calibrator_prompts_dir=CP, tasks_path=str(tasks),
                               out_episodes=out["ep"], out_steps=out["steps"], out_calls=out["calls"],
                               make_env=lambda: _Kept(engine)))
    steps = pd.read_parquet(out["steps"]).sort_values("step").reset_index(drop=True)
    calls = read_records(out["calls"]).to_pandas().set_index("call_id")
    prompts = [json.loads(calls.loc[c, "messages"]) for c in steps["call_id"]]
    return pd.read_parquet(out["ep"]), steps, prompts


def rerender(arm, steps, task):
    """The prompts actor_prompt renders from the recorded steps (experiences as the rows hold them)."""
    p, entries, out = load_prompts(HP, CP, arm), [], []
    for r in steps.to_dict("records"):
        out.append(actor_prompt(p, env="scienceworld", task=task, entries=entries, observation=r["obs_before"],
                                step=int(r["step"]), shown=json.loads(r["shown_actions"]), arm=arm))
        if entries:
            prev = steps.iloc[len(entries) - 1]
            entries[-1] = Entry(entries[-1].observation, entries[-1].action,
                                prev["experience"] if isinstance(prev["experience"], str) else None)
        entries.append(Entry(r["obs_before"], r["action"]))
    return out


@pytest.mark.slow
def test_joint_actor_rollout_parses_the_block_renders_it_beside_its_transition_and_executes_the_action(
        loopback, make_config, tmp_path, engine):
    eps, steps, prompts = run_arm("joint", joint_policy, loopback, make_config, tmp_path, engine)
    assert len(steps) == 5 and arm_settings("loop", "joint", ACTOR, 64).mode == "joint"
    # row t holds the review of transition t, written by the reply at step t + 1 (the step-1 block reviews nothing)
    assert list(steps["review_decision"].fillna("none")) == ["CALIBRATE", "INVALID", "NOUPDATE", "NOUPDATE", "none"]
    assert steps["experience"].iloc[0] == NOTE and steps["experience"].iloc[1:].isna().all()
    assert list(steps["review_call_id"].iloc[:4]) == list(steps["call_id"].iloc[1:])
    # every action executed; the reply without an <action> is a recorded invalid action
    assert list(steps["parse_status"]) == ["ok", "ok", "ok", "unparsable", "ok"]
    assert steps["action"].iloc[3] == "I will think" and eps["n_unparsable"].iloc[0] == 1
    assert (eps["n_experiences"].iloc[0], eps["n_review_invalid"].iloc[0]) == (1, 1)
    a1 = steps["action"].iloc[0]
    line = f"Action 1: '{a1}']\n[Experience derived from Action 1 -> its returned observation: {NOTE}]\n[Observation 2:"
    texts = [m[-1]["content"] for m in prompts]
    assert "Experience derived" not in texts[0] + texts[1]          # written at step 2: shown from step 3 on
    for k in (2, 3, 4):
        assert line in texts[k] and texts[k].count("Experience derived") == 1
    for k, text in enumerate(texts):                                 # no reward, score or later action
        assert "<calibration>" in text and "reward" not in text.lower() and "score" not in text.lower()
        assert f"Action {k + 1}:" not in text and "Admissible actions:" in text
    assert prompts == rerender("joint", steps, eps["task"].iloc[0])   # the SFT data's prompts are these


@pytest.mark.slow
def test_action_only_rollout_keeps_the_raw_history(loopback, make_config, tmp_path, engine):
    eps, steps, prompts = run_arm("action_only", action_policy, loopback, make_config, tmp_path, engine)
    assert len(steps) == 5 and (steps["parse_status"] == "ok").all() and steps["review_decision"].isna().all()
    texts = [m[-1]["content"] for m in prompts]
    assert not any("Experience derived" in t or "calibration" in t for t in texts)
    assert all(t.rstrip().endswith("inside <action> </action> tags, and nothing else.") for t in texts)
    assert prompts == rerender("action_only", steps, eps["task"].iloc[0])
    assert eps["condition"].iloc[0] == "action_only"


def test_the_joint_grammar_admits_only_valid_blocks_and_listed_actions():
    from memtrials.llm.structured import gbnf_joint

    g = gbnf_joint(["look around", 'open door to "hall"'], 40)
    assert not g.startswith("root ::=")             # never read as a plain choice list
    assert '"look around" | "open door to \\"hall\\""' in g
    assert '{\\"decision\\":\\"NOUPDATE\\",\\"experience\\":null}' in g and "[A-Za-z]" in g and "{7,39}" in g
    with pytest.raises(ValueError, match="choices"):
        gbnf_joint([], 40)
    with pytest.raises(ValueError, match="max_chars"):
        gbnf_joint(["x"], 0)
    with pytest.raises(ValueError, match="mode 'joint'"):
        ActorSettings(model="m", mode="react", joint_grammar_chars=40)
    assert arm_settings("m", "joint", ACTOR, 64, "constrained", 40).joint_grammar_chars == 40
    assert arm_settings("m", "joint", ACTOR, 64, "free", 40).joint_grammar_chars is None
    assert arm_settings("m", "action_only", ACTOR, 64, "constrained", 40).joint_grammar_chars is None
    with pytest.raises(ValueError, match="calibrator.joint.reply"):
        arm_settings("m", "joint", ACTOR, 64, "grammar", 40)


@pytest.mark.slow
def test_a_grammar_endpoint_gets_the_joint_grammar_and_a_bad_reply_is_still_invalid(
        loopback, make_config, tmp_path, engine):
    """On an endpoint that declares grammars the request carries the joint grammar (the listed
    actions in it) and the step records it; the loopback ignores grammars, so its malformed
    block at step 3 shows that a reply outside the grammar is still parsed and recorded
    INVALID.  With ``reply: free`` the same endpoint gets no grammar."""
    seen = []

    def policy(body):
        seen.append(body.get("grammar"))
        return joint_policy(body)

    eps, steps, prompts = run_arm("joint", policy, loopback, make_config, tmp_path, engine, grammar=True)
    assert (steps["constraint"] == "grammar").all() and len(seen) == 5
    for g, shown in zip(seen, steps["shown_actions"]):
        assert g.startswith("# joint reply") and all(json.dumps(a) in g for a in json.loads(shown))
    assert list(steps["review_decision"].fillna("none")) == ["CALIBRATE", "INVALID", "NOUPDATE", "NOUPDATE", "none"]
    assert list(steps["parse_status"]) == ["ok", "ok", "ok", "unparsable", "ok"]
    seen.clear()
    eps, steps, _ = run_arm("joint", policy, loopback, make_config, tmp_path / "free", engine, reply="free",
                            grammar=True)
    assert seen == [None] * 5 and (steps["constraint"] == "none").all()
