"""The planted anti-persistence world (issue 38): policy, truth, and the known-answer tables on
streams drawn from the declared chances (the end-to-end planted run: test_planted_run.py)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from memtrials.config import REPO_ROOT
from memtrials.studies.antipersist import planted
from memtrials.studies.antipersist.planted_checks import flaw_table, mode_cluster_table, selector_table

CLUSTERS = {"a": "(cluster a)", "b": "(cluster b)"}
PARAMS = {"base": 0.3,
          "effects": {"none": {"a": 0.0, "b": 0.0}, "imitation": {"a": 0.4, "b": 0.05},
                      "strategic": {"a": 0.1, "b": 0.1}, "corrective": {"a": 0.0, "b": 0.35}},
          "flaw": {"effect": 0.25, "after_failure": 0.6, "after_success": 0.1}}


def plant() -> planted.AntiPlant:
    return planted.AntiPlant.of(PARAMS, CLUSTERS)


def test_truth_best_mode_and_flaw_reproduction():
    p = plant()
    assert planted.best_modes(p) == {"a": "imitation", "b": "corrective"}
    assert planted.flaw_reproduction(p) == pytest.approx(0.5 * 0.25)
    assert p.chance("imitation", "a", flawed=True) == pytest.approx(0.45)
    with pytest.raises(ValueError, match="every mode"):
        planted.AntiPlant.of({**PARAMS, "effects": {"none": {"a": 0}}}, CLUSTERS)


def test_mode_phrases_name_each_prompt_file_alone():
    texts = {m: (REPO_ROOT / "config/prompts/memory" / f"guidance_{m}.md").read_text() for m in planted.MODE_PHRASES}
    for mode, phrase in planted.MODE_PHRASES.items():
        assert [m for m, t in texts.items() if phrase in t] == [mode]


def _body(system: str, user: str, seed: int = 0, schema: dict | None = None) -> dict:
    body = {"seed": seed, "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}]}
    if schema:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "rules", "schema": schema}}
    return body


def test_policy_roles_and_rates():
    p = plant()
    reply = planted.make_policy(p, lambda body, right: "R" if right else "W")
    g = reply(_body("You help... Write avoidance rules for ...", "Current task: x\nWrite the guidance for the current task."))
    assert g == "- Planted guidance (mode corrective)."
    user = f"Guidance for this task:\n{g}\nYour task is to: fetch the key (cluster b)"
    rights = [reply(_body("sys", user, s)) == "R" for s in range(3000)]
    assert abs(np.mean(rights) - 0.65) < 4 * np.sqrt(0.65 * 0.35 / 3000)
    # a flawed rule shown lowers it; guidance of other tasks' prompts after the task line is not read
    assert planted.shown(_body("s", f"Rules: x {planted.FLAWED}\nYour task is to: t (cluster a)")) == ("none", True)
    schema = {"properties": {"rules": {}}}
    flawed = [planted.FLAWED in json.loads(reply(_body("s", f"Task: t{s}\nOutcome: failed after 2 actions", s, schema)))["rules"][0]
              for s in range(2000)]
    assert abs(np.mean(flawed) - 0.6) < 0.05


# -- the known-answer tables on planted draws ---------------------------------------------------

def episodes(n: int, seed: int) -> pd.DataFrame:
    p, rng = plant(), np.random.default_rng(seed)
    rows = []
    for i in range(n):
        c = "ab"[i % 2]
        mode = planted.MODES[rng.integers(4)]
        status = "not_needed" if mode == "none" else ("ok" if rng.random() < 0.9 else "no_success")
        shown = mode if status in ("ok", "not_needed") else "none"
        rows.append({"task": f"task {i} (cluster {c})", "task_id": f"t{i}", "retrieval": "[]", "mode": mode,
                     "synthesis_status": status,
                     "mode_reason": "neighbours", "won": bool(rng.random() < p.chance(shown, c))})
    return pd.DataFrame(rows)


def test_mode_cluster_table_covers_the_planted_chances():
    hits = []
    for seed in range(20):
        t = mode_cluster_table(episodes(400, seed), plant())
        assert len(t) == 8
        hits += list(t["covered"])
    assert np.mean(hits) >= 0.9


def test_repeated_requests_count_once():
    """A task met again with the same guidance sends the same request (the study's actor does not
    sample): its repeats are one draw, not many (counting them would narrow the interval falsely)."""
    df = episodes(40, 0)
    tripled = pd.concat([df, df, df], ignore_index=True)
    a, b = mode_cluster_table(df, plant()), mode_cluster_table(tripled, plant())
    pd.testing.assert_frame_equal(a, b)


def test_selector_table_reads_the_best_mode_share():
    df = episodes(400, 0)
    # a selector that took each cluster's best mode in 60 % of its greedy choices
    rng = np.random.default_rng(1)
    best = planted.best_modes(plant())
    df["mode"] = [best[t[-2]] if rng.random() < 0.6 else "none" for t in df["task"]]
    t = selector_table(df, plant()).set_index("cluster")
    assert t["above_chance"].all() and list(t["best_mode"]) == ["imitation", "corrective"]
    df["mode"] = [planted.MODES[k] for k in rng.integers(4, size=len(df))]  # chance: not above it
    assert not selector_table(df, plant())["above_chance"].any()


def stream(n: int, seed: int, shuffle_parents: bool = False) -> tuple[dict, pd.DataFrame]:
    """A stream through the planted chances: each episode served up to 2 stored rules, a rule
    written per episode, flawed at the planted rates given the outcome."""
    p, rng = plant(), np.random.default_rng(seed)
    rules, lineage, train = [], [], []
    for i in range(n):
        parents = [rules[k]["id"] for k in rng.choice(len(rules), size=min(2, len(rules)), replace=False)] if rules else []
        flawed = any(planted.FLAWED in r["text"] for r in rules if r["id"] in parents)
        won = bool(rng.random() < p.chance("none", "ab"[i % 2], flawed))
        bad = rng.random() < (p.flaw.after_success if won else p.flaw.after_failure)
        rid = f"R{i + 1:05d}"
        rules.append({"id": rid, "text": f"rule {i}" + (f" {planted.FLAWED}" if bad else ""), "parents": parents})
        lineage.append({"episode": f"e{i}", "parents": parents, "generated": [{"id": rid, "admitted": True}]})
        train.append({"won": won, "retrieval": json.dumps([{"id": x, "cosine": 1.0} for x in parents])})
    if shuffle_parents:  # a wiring defect: the lineage records another episode's parents
        order = rng.permutation(n)
        lineage = [{**e, "parents": lineage[order[k]]["parents"]} for k, e in enumerate(lineage)]
    return {"rules": rules, "lineage": lineage}, pd.DataFrame(train)


def test_flaw_table_covers_the_planted_reproduction_and_a_wiring_defect_fails_it():
    good = [bool(flaw_table([stream(400, s)], plant())["covered"].iloc[0]) for s in range(20)]
    assert np.mean(good) >= 0.9
    bad = [flaw_table([stream(400, s, shuffle_parents=True)], plant()) for s in range(20)]
    assert np.mean([bool(t["covered"].iloc[0]) for t in bad]) < 0.5
