"""The calibrator's known-answer run (issue 38): the planted calibrator reads every role of the
label chain from the real prompts, the truth follows from its declared rates (by hand and by
enumeration), the run through the real client recovers it (coverage over seeds), and a wiring
defect (the experience not put into the recipient's prompt) is caught."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import pytest
import yaml

from memtrials.agent.prompts import ActorPrompts
from memtrials.envs.planted.world import make_task
from memtrials.studies.history.calibrator import compare, planted
from memtrials.studies.history.calibrator.contexts import Context
from memtrials.studies.history.calibrator.known import known_answer
from memtrials.studies.history.calibrator.prompts import CalibratorPrompts
from memtrials.agent.views import Entry
from memtrials.llm.structured import gbnf_choice

from tests.conftest import embedded_config

REPO = Path(__file__).resolve().parents[2]
HP = ActorPrompts.load(str(REPO / "config/prompts/actor"))
CP = CalibratorPrompts.load(str(REPO / "config/prompts/calibrator"))
MODELS = yaml.safe_load((REPO / "config/models.yaml").read_text())["endpoints"]
PARAMS = MODELS["planted-calibrator"]["planted"]["params"]
ACTOR = yaml.safe_load((REPO / "config/config.yaml").read_text())["history"]["actor"]


def _context() -> Context:
    task = make_task("train-vault-0003")
    from memtrials.envs.planted.env import PlantedEnv

    env = PlantedEnv()
    o0 = env.reset(task.task_id).text
    o1 = env.step(task.steps[0].right)
    return Context("c1", "planted-calibrator", "planted", task.task_id, "e1", task.goal, 1,
                   (Entry(o0, task.steps[0].right),), task.steps[0].right, o1.text, tuple(o1.admissible))


def _body(msgs, seed=0):
    return {"messages": msgs, "seed": seed}


def test_reads_every_role():
    p = planted.PlantedCalibrator.from_params(PARAMS)
    c = _context()
    review = HP.review_messages(env=c.env, task=c.task, history=c.review_history(), action=c.action,
                                observation=c.observation)
    got = {json.loads(planted.respond(p, _body(review, s)))["decision"] for s in range(40)}
    assert got == {"CALIBRATE", "NOUPDATE"}
    for kind, e in planted.EXPERIENCES.items():
        scr = CP.screen_messages(HP, env=c.env, task=c.task, history=c.review_history(), action=c.action,
                                 observation=c.observation, experience=e)
        assert set(json.loads(planted.respond(p, _body(scr)))) == {"unsupported", "restates_observation"}
        with_e = compare.actor_messages(HP, c, e, "react")
        assert planted.experience_kind("\n".join(m["content"] for m in with_e)) == kind
    base = compare.actor_messages(HP, c, None, "react")
    assert planted.experience_kind("\n".join(m["content"] for m in base)) is None
    right = make_task(c.task_id).steps[1].right
    wrong = next(a for a in c.next_actions if a != right)
    sure = planted.PlantedCalibrator.from_params({**PARAMS, "judge": {"right": 1.0, "wrong": 0.0}})
    for a, b, want in ((right, wrong, "A"), (wrong, right, "B")):
        msgs = CP.compare_messages(base[-1]["content"], a, b)
        assert json.loads(planted.respond(sure, _body(msgs)))["better"] == want
    always = planted.PlantedCalibrator.from_params({**PARAMS, "actor": {"none": 1.0, "helpful": 1.0, "harmful": 1.0}})
    body = {**_body(compare.actor_messages(HP, c, None, "choice")), "grammar": gbnf_choice(list(c.next_actions))}
    assert planted.respond(always, body) == right


def test_truth_by_hand():
    p = planted.PlantedCalibrator.from_params({
        "calibrate": 0.5, "helpful": 0.75,
        "screen": {"helpful": {"unsupported": 0.1, "restates": 0.2}, "harmful": {"unsupported": 0.5, "restates": 0.0}},
        "actor": {"none": 0.4, "helpful": 0.8, "harmful": 0.1}, "judge": {"right": 0.9, "wrong": 0.05}})
    win, loss = planted.pair_rates(p, "helpful")
    assert win == pytest.approx(0.8 * 0.6 * 0.81 + 0.2 * 0.4 * 0.0025)
    assert loss == pytest.approx(0.2 * 0.4 * 0.81 + 0.8 * 0.6 * 0.0025)
    # one recipient: CALIBRATE unless the pair is a loss; two: unless either is (q > 0 needs no loss then)
    assert planted.calibrate_given(p, "helpful", 1) == pytest.approx(1 - loss)
    assert planted.calibrate_given(p, "helpful", 2) == pytest.approx((1 - loss) ** 2)
    t = planted.truth(p, 1)
    lw, lh = planted.pair_rates(p, "harmful")[1], loss
    assert t["target CALIBRATE (full)"] == pytest.approx(0.5 * (0.75 * 0.72 * (1 - lh) + 0.25 * 0.5 * (1 - lw)))
    assert t["target CALIBRATE (screen_only)"] == pytest.approx(0.5 * (0.75 * 0.72 + 0.25 * 0.5))
    assert t["q(E) | helpful"] == pytest.approx(win - loss)


def test_bad_params_name_the_key():
    bad = copy.deepcopy(PARAMS)
    del bad["screen"]["harmful"]["restates"]
    with pytest.raises(ValueError, match=r"screen\.harmful\.restates"):
        planted.PlantedCalibrator.from_params(bad)
    with pytest.raises(ValueError, match=r"judge: right \+ wrong"):
        planted.PlantedCalibrator.from_params({**PARAMS, "judge": {"right": 0.8, "wrong": 0.3}})


def _run(tmp_path: Path, seed: int, contexts: int = 80) -> "object":
    cfg = embedded_config(tmp_path)
    out = tmp_path / f"run{seed}"
    return asyncio.run(known_answer(
        cfg, model="planted-calibrator", params=PARAMS,
        cell={"seed": seed, "tasks": 40, "contexts": contexts, "in_flight": 8, "max_tokens": 96}, actor=ACTOR,
        actor_prompts_dir=str(REPO / "config/prompts/actor"), calibrator_prompts_dir=str(REPO / "config/prompts/calibrator"),
        outdir=str(out), tables_dir=str(out / "tables")))


def test_intervals_cover_the_truth(tmp_path):
    """Four seeds of the whole chain through the real client: at least 90 % of the
    (quantity, seed) cells' 95 % intervals hold the planted truth."""
    tables = [_run(tmp_path, s) for s in range(4)]
    cells = sum(len(t) for t in tables)
    covered = sum(int(t["covered"].sum()) for t in tables)
    assert covered / cells >= 0.90, [t[~t["covered"]][["quantity", "estimate", "lo", "hi", "truth"]] for t in tables]
    assert (tmp_path / "run0" / "tables" / "known_answer.md").exists()


def test_mutation_experience_not_shown(tmp_path, monkeypatch):
    """A wiring defect: the recipient's prompt 'with E' is built without E.  The pair outcomes
    then follow the no-E rate on both arms, and the known-answer check fails."""
    real = compare.actor_messages
    monkeypatch.setattr(compare, "actor_messages", lambda hp, c, exp, mode: real(hp, c, None, mode))
    t = _run(tmp_path, 0, contexts=120)
    bad = set(t.loc[~t["covered"], "quantity"])
    assert {"win | helpful", "q(E) | helpful"} & bad, t
