"""The planted playbook world's policy and truth (issue 38), and a known-answer check of the
study's own estimate, curation and choice functions on outcomes the planted ``p`` draws.

The simulated rounds draw each episode's success from the declared ``p`` of what it serves
(the planted actor's one draw per episode), through :func:`memtrials.curation.practice_round`,
:func:`block_estimates`, :func:`curate` and :func:`choose`: the pieces the practice and choice
jobs call.  The end-to-end run through the planted endpoint is ``test_planted_run.py``.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pandas as pd
import pytest

from memtrials.curation import block_estimates, choose, curate, practice_round, rbc_candidates
from memtrials.studies.playbook import planted, planted_truth as truth
from tests.playbook.planted_plant import LESSONS, plant

CODES = list(LESSONS)


def draw(*parts) -> float:
    return int.from_bytes(hashlib.sha256(json.dumps([str(p) for p in parts]).encode()).digest()[:8], "big") / 2**64


def test_chance_is_the_declared_sum_with_the_interaction():
    pl = plant()
    assert pl.chance([]) == pytest.approx(0.35)
    assert pl.chance(["H1", "X1"]) == pytest.approx(0.35 + 0.12 - 0.15)
    assert pl.chance(["H3"]) == pytest.approx(0.41)
    assert pl.chance(["H3", "N1"]) == pytest.approx(0.35 + 0.06 + 0.06)
    assert plant(base=0.95).chance(["H1", "H2"]) == 1.0  # clipped


def test_bad_bank_is_refused_naming_the_code():
    with pytest.raises(ValueError, match="tip Z9"):
        planted.Plant(0.3, {"Z9": 0.1}, {"Z9": "no code here"})
    with pytest.raises(ValueError, match="interaction"):
        planted.Plant(0.3, {"A1": 0.1}, {"A1": "x (tip A1)"}, ("A1", "B2", 0.1))


def test_banzhaf_truth_by_enumeration_matches_the_closed_form():
    pl = plant()
    blocks = [[c] for c in CODES]
    b = truth.block_truth(pl, blocks, p=0.5)
    want = {c: e for c, (e, _) in LESSONS.items()}
    want["H3"] += 0.03
    want["N1"] += 0.03  # the interaction splits at p = 1/2
    assert b == pytest.approx([want[c] for c in CODES])
    b3 = truth.block_truth(pl, blocks, p=1 / 3)
    assert b3[CODES.index("N1")] == pytest.approx(0.06 / 3)
    merged = truth.block_truth(pl, [["H3", "N1"], ["H1"]], p=0.5)  # both in one block: the whole interaction
    assert merged == pytest.approx([0.12, 0.12])


def test_best_set_and_greedy_truth():
    pl = plant()
    blocks = [[c] for c in CODES[:8]]
    tokens = [10] * 8
    best, value = truth.best_set(pl, blocks, tokens, budget=0.4)  # cap 32 tokens: 3 blocks
    assert {CODES[j] for j in best} == {"H1", "H2", "H3"}
    assert value == pytest.approx(0.62)
    greedy = truth.greedy_truth(pl, blocks, tokens, budget=0.4)
    assert {CODES[j] for j in greedy.blocks} == {"H1", "H2", "H3"}
    # with the interaction worth more, the best set of 4 takes H3 and N1 together
    best4, v4 = truth.best_set(plant(("H3", "N1", 0.2)), blocks, tokens, budget=0.5)
    assert {CODES[j] for j in best4} == {"H1", "H2", "H3", "N1"} and v4 == pytest.approx(0.82)


def _body(text: str, seed: int, schema: dict | None = None) -> dict:
    body = {"seed": seed, "messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": text}]}
    if schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    return body


def test_actor_is_right_at_the_planted_rate_one_draw_per_episode():
    pl = plant()
    served = "Playbook:\n- " + LESSONS["H1"][1] + "\n- " + LESSONS["X1"][1] + "\nYour task is to: put a mug on the desk"
    act = planted.make_policy(pl, lambda body, right: "RIGHT" if right else "WRONG")
    rights = [act(_body(served, s)) == "RIGHT" for s in range(4000)]
    p = pl.chance(["H1", "X1"])
    assert abs(np.mean(rights) - p) < 4 * np.sqrt(p * (1 - p) / 4000)
    # every step of one episode (same seed, same task, longer history) takes the same draw
    assert len({act(_body(served + "\n> step %d" % k, 7)) for k in range(5)}) == 1


def test_curator_writes_first_lessons_first_and_runs_differ():
    pl = plant()
    schema = {"properties": {"reasoning": {}, "operations": {"items": {"properties": {"section": {"enum": ["oth"]}}}}}}
    pb = ""
    written: list[list[str]] = []
    for tasks in (["a", "b"], ["c", "d"]):
        codes: list[str] = []
        pb = "Playbook (0 lessons):\n(empty)\n"
        for k in range(4):
            text = pb + "Reviews of this batch (2 attempts):\n" + "\n".join(
                f"Attempt {i + 1}. Task: {t}{k}" for i, t in enumerate(tasks))
            ops = json.loads(planted.curate_reply(pl, _body(text, 0, schema)))["operations"]
            assert all(o["section"] == "oth" for o in ops) and len(ops) == 2
            codes += [planted.codes_in(o["content"])[0] for o in ops]
            pb = "Playbook:\n" + "\n".join(f"[x] (oth) :: {LESSONS[c][1]}" for c in codes) + "\n"
        assert set(codes[:4]) == {"H1", "H2", "H3", "X1"} and len(set(codes)) == 8
        written.append(codes)
    assert set(written[0]) != set(written[1])  # seeded by the tasks: these two orders keep different lessons


def test_roles_by_schema_and_reflector_tags_only_shown_ids():
    tag_schema = {"properties": {"analysis": {}, "tags": {"items": {"properties": {"id": {"enum": ["oth-00001"]}}},
                                                          "maxItems": 1}}}
    body = _body("Playbook lessons shown during the attempt:\n[oth-00001] a\n[oth-00002] b", 0, tag_schema)
    assert planted.role_of(body) == "reflector"
    assert json.loads(planted.reflect(body))["tags"] == [{"id": "oth-00001", "tag": "neutral"}]
    assert planted.role_of(_body("x", 0)) == "actor"


# -- known-answer check of the study's estimate, curation and choice on planted draws ----------

def simulate(pl, block_codes, n: int, seed: int, stream: str = "estimate") -> tuple[pd.DataFrame, pd.DataFrame]:
    tasks = [f"t{i}" for i in range(8)]
    design = practice_round(tasks, n, len(block_codes), seed=seed)
    zs = design[[f"z{j}" for j in range(len(block_codes))]].to_numpy()
    y = [float(draw(stream, seed, int(s)) < truth.set_value(pl, block_codes, z))
         for s, z in zip(design["actor_seed"], zs)]
    return design, pd.DataFrame({"episode": design["episode"], "score": y})


def _coverage(pl, block_codes, n, seeds) -> float:
    t = truth.block_truth(pl, block_codes)
    hits = []
    for seed in seeds:
        design, scores = simulate(pl, block_codes, n, seed)
        est = block_estimates(design, scores, len(block_codes)).table
        hits += list((est["lo"] <= t) & (t <= est["hi"]))
    return float(np.mean(hits))


def test_block_intervals_cover_the_planted_banzhaf_values():
    pl = plant()
    cov = _coverage(pl, [[c] for c in CODES[:8]], n=240, seeds=range(40))
    assert cov >= 0.90, cov  # 320 block intervals at 95 %: about 0.95


def test_rbc_keeps_helpful_drops_harmful_and_beats_whole_by_the_planted_margin():
    pl = plant()
    blocks = [[c] for c in CODES[:8]]
    tokens = np.full(8, 10, dtype=np.int64)
    design, scores = simulate(pl, blocks, n=1600, seed=3)
    est = block_estimates(design, scores, 8).table["estimate"].to_numpy()
    cur = curate(est, tokens, budget=0.4)
    kept = {CODES[j] for j in cur.blocks}
    assert {"H1", "H2"} <= kept and "X1" not in kept
    # the choice between curated, whole and none on fresh episodes: the curated set wins, by the margin
    sets = {"curated:1": truth.included(cur.blocks, 8), "whole:1": np.ones(8, int), "none": np.zeros(8, int)}
    rows = []
    for name, z in sets.items():
        v = truth.set_value(pl, blocks, z)
        rows += [{"candidate": name, "episode": e, "score": float(draw("choice", e) < v)}
                 for e in range(2000)]
    choice = choose(rbc_candidates(["1"], [cur.served_tokens], [80]), pd.DataFrame(rows))
    assert choice.chosen.name == "curated:1"
    s = choice.scores.set_index("name")["score"]
    margin = truth.set_value(pl, blocks, sets["curated:1"]) - truth.set_value(pl, blocks, sets["whole:1"])
    assert margin > 0.08
    assert abs((s["curated:1"] - s["whole:1"]) - margin) < 4 * np.sqrt(2 * 0.25 / 2000)


def test_mutation_the_interval_check_fails_when_truth_is_another_runs():
    """Estimates of run 1 checked against run 2's blocks (a comparison drawn from another run) miss."""
    pl = plant()
    run1 = [[c] for c in ("H1", "H2", "H3", "X1", "N1", "N2", "H4", "X2")]
    run2 = [[c] for c in ("H1", "H2", "X1", "H3", "N3", "N4", "N1", "N2")]  # same codes, other block order
    assert _coverage(pl, run1, n=600, seeds=range(10)) >= 0.90
    t2 = truth.block_truth(pl, run2)
    hits = []
    for seed in range(10):
        design, scores = simulate(pl, run1, 600, seed)
        est = block_estimates(design, scores, 8).table
        hits += list((est["lo"] <= t2) & (t2 <= est["hi"]))
    assert np.mean(hits) < 0.8
