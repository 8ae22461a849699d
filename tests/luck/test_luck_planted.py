"""The planted luck agent (issue 38): what it reads from the prompts, the truth from its
declared rates, the registered analysis recovering it (coverage, readings), and a
wiring defect caught.  Statistical checks play the study's own writers and readers in
process (``planted_direct``); the real client's path is in ``test_luck_known_answer.py``."""

from __future__ import annotations

import copy
import dataclasses
import math
import sys
from pathlib import Path

import numpy as np
import pytest

from memtrials.stats import t_interval
from memtrials.studies.luck import planted, readers
from memtrials.studies.luck.analysis import endpoint_primaries
from memtrials.studies.luck.contrasts import CONTRASTS, world_values, y_matrix
from memtrials.studies.luck.design import ARMS, DECISIONS, INSTRUCTIONS, OUTCOMES, arm_lesson
from memtrials.studies.luck.inference import REGISTERED_RULES
from memtrials.studies.luck.prompts import PromptSet
from memtrials.studies.luck.worlds import generate_worlds

sys.path.insert(0, str(Path(__file__).parent))
from planted_direct import DEFAULT_RATES, play  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROMPTS = PromptSet.load(str(ROOT / "config" / "prompts" / "luck"))


def rates(**switch_rb_good: float) -> dict:
    r = copy.deepcopy(DEFAULT_RATES)
    r["switch"]["RB"]["good"].update(switch_rb_good)
    return r


def test_reads_every_rendered_request():
    """Instruction, decision, outcome and the memory item's kind, from the real prompts of
    worlds of every domain (both positions, both cues)."""
    ws = generate_worlds(3, 16, 4)
    for w in ws:
        for i in INSTRUCTIONS:
            for d in DECISIONS:
                for o in OUTCOMES:
                    m = PROMPTS.writer_messages(w, i, d, o)
                    got = planted.read_writer_request(m[0]["content"], m[1]["content"])
                    assert got[:4] == (i, d, o, PROMPTS.used_tool(w, d)), (w.world_id, i, d, o)
                    assert got[4] == (w.better_tool, w.worse_tool)
        for d in DECISIONS:
            for o in OUTCOMES:
                for tool, kind in ((w.worse_tool, "recommends_worse"), (w.better_tool, "recommends_better")):
                    lesson = planted.lesson_text(tool, PROMPTS.used_tool(w, d), o)
                    user = PROMPTS.reader_messages(w, d, o, lesson)[1]["content"]
                    assert planted.memory_kind(user, w.better_tool, w.worse_tool) == kind
                for memory, kind in ((PROMPTS.neutral_memory(w), "irrelevant"),
                                     (PROMPTS.planted_memory(w), "directive")):
                    user = PROMPTS.reader_messages(w, d, o, memory)[1]["content"]
                    assert planted.memory_kind(user, w.better_tool, w.worse_tool) == kind


def test_truth_by_hand():
    p = planted.PlantedLuck.from_params({
        "switch": {i: {"good": {"success": 0.1, "failure": 0.4}, "bad": {"success": 0.7, "failure": 0.8}}
                   for i in INSTRUCTIONS},
        "reader": {"recommends_worse": 0.9, "recommends_better": 0.2, "irrelevant": 0.3, "directive": 0.6}})
    t = planted.contrast_truth(p)
    # good decision: a switch recommends the worse tool; E[Y] = q 0.9 + (1 - q) 0.2
    ey = {q: 0.2 + 0.7 * q for q in (0.1, 0.4, 0.3, 0.2)}
    assert math.isclose(t["P2"], ey[0.4] - ey[0.1], abs_tol=1e-12)  # neutral terms cancel
    assert math.isclose(t["A2"], ey[0.4] - 0.3, abs_tol=1e-12)
    assert math.isclose(t["L2"], ey[0.4] - ey[0.1], abs_tol=1e-12)
    # bad decision: keeping recommends the worse tool, q = 1 - switch
    assert math.isclose(t["P3m"], ey[0.3] - ey[0.2], abs_tol=1e-12)
    assert math.isclose(t["Sus"], 0.6 - 0.3, abs_tol=1e-12)
    assert math.isclose(t["dP2[RBD-RB]"], 0.0, abs_tol=1e-12)
    d = planted.PlantedLuck.from_params(DEFAULT_RATES)
    td = planted.contrast_truth(d)
    assert math.isclose(td["P2"], 0.10) and math.isclose(td["dP2[RBD-RB]"], -0.08)
    assert math.isclose(td["P3m"], 0.05) and math.isclose(td["Sus"], 0.5)


def test_bad_params_name_the_key():
    bad = copy.deepcopy(DEFAULT_RATES)
    del bad["switch"]["N"]["bad"]["failure"]
    with pytest.raises(ValueError, match=r"switch\.N\.bad\.failure"):
        planted.PlantedLuck.from_params(bad)
    bad = copy.deepcopy(DEFAULT_RATES)
    bad["reader"]["directive"] = 1.5
    with pytest.raises(ValueError, match=r"reader\.directive"):
        planted.PlantedLuck.from_params(bad)
    with pytest.raises(ValueError, match="unknown keys"):
        planted.PlantedLuck.from_params({**DEFAULT_RATES, "rates": 1})


def _coverage(answers_by_seed, world_ids) -> dict[str, list[bool]]:
    truth = planted.contrast_truth(planted.PlantedLuck.from_params(DEFAULT_RATES))
    out: dict[str, list[bool]] = {c.name: [] for c in CONTRASTS}
    for ans in answers_by_seed:
        y = y_matrix(ans, world_ids)
        for c in CONTRASTS:
            iv = t_interval(world_values(y, c).value.dropna().to_numpy(), c.support, 0.95)
            out[c.name].append(bool(iv.lo <= truth[c.name] <= iv.hi))
    return out


def test_intervals_cover_the_planted_truth():
    """Every registered contrast's 95 % interval over 12 seeds of the planted draws on 32
    worlds: at least 90 % of the (contrast, seed) cells cover the truth (measured 96.6 %
    over 20 seeds; the rare-event contrasts, e.g. P2[RBD] at truth 0.02, fall lower:
    with no world showing the event the t interval is the degenerate [0, 0])."""
    ws = generate_worlds(5, 8, 4)
    answers = [play(planted.policy(**{**DEFAULT_RATES, "seed": s}), ws, PROMPTS)[1] for s in range(12)]
    cov = _coverage(answers, [w.world_id for w in ws])
    share = np.mean([c for v in cov.values() for c in v])
    assert share >= 0.90, (share, {k: np.mean(v) for k, v in cov.items()})


@pytest.fixture(scope="module")
def worlds256():
    return generate_worlds(11, 16, 16)


@pytest.mark.parametrize("p2, expect", [(0.10, True), (0.0, False)])
def test_reading_at_planted_p2(worlds256, p2, expect):
    """256 worlds under the registered rules: planted P2 = 0.10 reads luck-carrying,
    planted P2 = 0 does not (it reads bounded below 0.10)."""
    _, ans = play(planted.policy(**rates(failure=p2)), worlds256, PROMPTS)
    readings, _ = endpoint_primaries(y_matrix(ans, [w.world_id for w in worlds256]), REGISTERED_RULES)
    assert (readings["P2"].word == "luck-carrying") is expect, readings["P2"]
    if not expect:
        assert readings["P2"].word == "bounded below 0.10"


def test_mutation_reader_served_the_other_lesson(monkeypatch):
    """A wiring defect: the reader cell is served the lesson of the other outcome (the
    swapped arm's item) while its record says the matched arm.  The known-answer check
    (the truth inside the interval) fails for the contrasts that tell them apart."""
    ws = generate_worlds(5, 8, 4)
    good = play(planted.policy(**rates(failure=0.6)), ws, PROMPTS)[1]
    real = readers.memory_for

    def swapped(arm, w, decision, outcome, prompts, lessons):
        if arm in ("RB", "RBx"):
            arm = {"RB": "RBx", "RBx": "RB"}[arm]
        return real(arm, w, decision, outcome, prompts, lessons)

    monkeypatch.setattr(readers, "memory_for", swapped)
    bad = play(planted.policy(**rates(failure=0.6)), ws, PROMPTS)[1]
    truth = planted.contrast_truth(planted.PlantedLuck.from_params(rates(failure=0.6)))
    ids = [w.world_id for w in ws]

    def covered(ans, name):  # at 99.9 %, so the correct run's check fails only once in a thousand seeds
        c = next(c for c in CONTRASTS if c.name == name)
        iv = t_interval(world_values(y_matrix(ans, ids), c).value.dropna().to_numpy(), c.support, 0.999)
        return iv.lo <= truth[name] <= iv.hi

    assert covered(good, "P2") and covered(good, "L2")
    assert not covered(bad, "P2") and not covered(bad, "L2")
