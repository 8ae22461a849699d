"""The baselines' serving rules on synthetic playbooks and the loopback endpoint: Random fills
the budget, Own follows the tags (or DC's usage counts), the tag rules differ, Top-k follows
the embedder's similarity, DC_outcome is told the outcomes and DC_self is not (asserted on
the prompts), DG-Mem curates by its Shapley estimates, Pooled merges the runs' duplicates
and includes each block at 1/K, the starred methods choose on the evaluation episodes."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pandas as pd
import pytest

from memtrials.curation import practice_round
from memtrials.llm import open_client, read_records
from memtrials.memory.base import Lesson, TaskContext
from memtrials.testing.server import hash_vector
from memtrials.studies.playbook import baselines as bl
from tests.conftest import REPO
from tests.memory.helpers import config as memory_config

PROMPTS = str(REPO / "config" / "prompts" / "playbook")


def playbook(n: int = 10, seed: int = 0, dc: bool = False) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        h, b, u = (int(x) for x in rng.integers(0, 9, 3))
        rows.append({"pass": 1, "position": i, "lesson_id": f"L{i:02d}", "section": "s", "text": f"lesson {i} " * (i + 1),
                     "tokens": int(rng.integers(3, 20)), "helpful": None if dc else h, "harmful": None if dc else b,
                     "neutral": None if dc else int(rng.integers(0, 4)), "uses": int(u) if dc else None})
    return pd.DataFrame(rows)


def test_random_fills_the_budget_in_two_seeded_orders():
    pb = playbook(14)
    tok = dict(zip(pb["lesson_id"], pb["tokens"]))
    cap = bl.cap_of(pb, 0.4)
    sets = bl.random_sets(pb, 0.4, seed=5)
    assert len(sets) == 2 and sets[0] != sets[1] and sets == bl.random_sets(pb, 0.4, seed=5)
    for s in sets:
        used = sum(tok[i] for i in s)
        assert used <= cap
        # full: no lesson left out would still fit
        assert all(used + tok[i] > cap for i in tok if i not in s)


def test_own_follows_the_helpful_share_and_dc_usage():
    pb = playbook(12)
    share = {r.lesson_id: (r.helpful / (r.helpful + r.harmful + r.neutral) if r.helpful + r.harmful + r.neutral else 0)
             for r in pb.itertuples()}
    ranked = bl.own_rank(pb)
    assert [share[i] for i in ranked] == sorted(share.values(), reverse=True)
    served = bl.budget_set(pb, ranked, 0.4)
    assert served == [i for i in ranked if i in set(served)]  # taken in the tag order
    first_out = next(i for i in ranked if i not in served)
    assert all(share[i] >= share[first_out] or i in served for i in ranked[:ranked.index(first_out)])
    dc = playbook(12, dc=True)
    uses = dict(zip(dc["lesson_id"], dc["uses"]))
    assert [uses[i] for i in bl.own_rank(dc)] == sorted(uses.values(), reverse=True)


def test_the_eight_tag_rules_rank_differently():
    pb = playbook(16, seed=3)
    ranks = {r: tuple(bl.tag_rank(pb, r)) for r in bl.TAG_RULES}
    assert len(bl.TAG_RULES) == 8 and all(sorted(x) == sorted(pb["lesson_id"]) for x in ranks.values())
    assert len(set(ranks.values())) >= 6
    fewest = ranks["fewest_harmful"]
    harmful = dict(zip(pb["lesson_id"], pb["harmful"]))
    assert [harmful[i] for i in fewest] == sorted(harmful.values())
    with pytest.raises(ValueError, match="tag rule 'bogus'"):
        bl.tag_rank(pb, "bogus")


def test_top_k_follows_the_embedders_similarity(tmp_path, loopback):
    srv = loopback(policy="first_admissible", embed_dim=16)
    cfg = memory_config(tmp_path, srv)
    pb = playbook(9)
    lessons = [Lesson(r.lesson_id, r.text) for r in pb.itertuples()]
    tok = dict(zip(pb["lesson_id"], pb["tokens"]))
    task = "put a clean mug in the coffee machine"
    sims = np.array([np.dot(hash_vector(x.text, 16), hash_vector(task, 16)) for x in lessons])
    by_sim = [lessons[i].id for i in np.argsort(-sims, kind="stable")]

    async def serve(view):
        async with open_client(cfg, "tests/baselines", tmp_path / "calls.parquet") as client:
            ep = await view.for_episode(client, TaskContext("alfworld", "t1", task, "e1"))
        return ep, [x["id"] for x in view.chosen["e1"]]

    ep, chosen = asyncio.run(serve(bl.SimilarityView(lessons, tok, "emb", k=3)))
    assert set(ep.block.ids) == set(by_sim[:3])  # the 3 most similar, served in playbook order
    assert list(ep.block.ids) == [x for x in pb["lesson_id"] if x in set(by_sim[:3])]
    assert chosen == by_sim[:3] and ep.columns == {}
    cap = bl.cap_of(pb, 0.4)
    cut, chosen = asyncio.run(serve(bl.SimilarityView(lessons, tok, "emb", cap=cap)))
    assert chosen == bl.fill(by_sim, tok, cap) and set(cut.block.ids) == set(chosen)


def _practice(tmp_path):
    episodes = pd.DataFrame({"episode_id": ["p/0", "p/1"], "task": ["heat the soup", "cool the apple"],
                             "won": [True, False]})
    steps = pd.DataFrame({"episode_id": ["p/0", "p/1"], "step": [1, 1], "action": ["go to stove", "go to sink"],
                          "observation": ["the stove is hot", "nothing happens"]})
    return episodes, steps


@pytest.mark.parametrize("with_outcome", [False, True])
def test_dc_outcome_is_told_the_outcomes_and_dc_self_is_not(tmp_path, loopback, with_outcome):
    pb = playbook(6)
    ranked = list(pb["lesson_id"])[::-1]
    srv = loopback(policy=lambda body: json.dumps({"keep": ranked + ["nope"]}))
    cfg = memory_config(tmp_path, srv)
    episodes, steps = _practice(tmp_path)
    calls = tmp_path / "calls.parquet"

    async def main():
        async with open_client(cfg, "tests/baselines", calls) as client:
            return await bl.dc_select(client, "loop", PROMPTS, pb, episodes, steps, budget=0.4,
                                      with_outcome=with_outcome)

    out = asyncio.run(main())
    rec = read_records(calls).to_pylist()
    assert len(rec) == 1
    prompt = "\n".join(m["content"] for m in json.loads(rec[0]["messages"]))
    assert "heat the soup" in prompt and "go to stove" in prompt and "[L00]" in prompt
    told = ("Outcome: succeeded" in prompt) and ("Outcome: failed" in prompt)
    assert told is with_outcome
    if not with_outcome:
        assert "succeeded" not in prompt.split("Attempts (")[1].split("Which lessons")[0].replace(
            "which attempts succeeded", "")
    assert rec[0]["purpose"] == ("dc_outcome_select" if with_outcome else "dc_self_select")
    tok = dict(zip(pb["lesson_id"], pb["tokens"]))
    assert out["keep"] == bl.fill(ranked, tok, bl.cap_of(pb, 0.4)) and "nope" in out["listed"]


def test_dgmem_curates_by_its_shapley_estimates():
    rng = np.random.default_rng(2)
    m = 3
    design = practice_round([f"t{i}" for i in range(4)], 240, m, seed=9)
    z = design[[f"z{j}" for j in range(m)]].to_numpy()
    won = rng.random(len(design)) < 0.3 + 0.5 * z[:, 1] - 0.2 * z[:, 2]
    scores = pd.DataFrame({"design_episode": design["episode"], "won": won})
    pb = playbook(6)
    pb["tokens"] = 10
    blocks = pd.DataFrame({"lesson_id": pb["lesson_id"], "position": range(6), "block": [0, 0, 1, 1, 2, 2]})
    ids, table = bl.dgmem_curated(design, scores, blocks, pb, budget=0.4, p=0.5)
    assert ids == ["L02", "L03"] and table.loc[1, "estimate"] > 0.3 and bool(table.loc[1, "curated"])
    with pytest.raises(ValueError, match="no score"):
        bl.dgmem_curated(design, scores.iloc[:-1], blocks, pb, budget=0.4, p=0.5)
    est = pd.DataFrame({"block": [0, 1, 2], "estimate": [0.01, 0.4, -0.2]})
    assert bl.positive_blocks(est, blocks) == ["L00", "L01", "L02", "L03"]  # no cap


def test_pooled_merges_duplicates_and_includes_each_block_at_one_over_k():
    a, b = playbook(3), playbook(3, seed=1)
    b["text"] = ["Check the fridge first.", "Open the drawer before looking inside.", "Use the sink to clean."]
    b.loc[0, "text"] = a.loc[0, "text"]  # one near-duplicate across runs
    texts = list(a["text"]) + list(b["text"])
    vectors = np.array([hash_vector(t, 16) for t in texts])
    pooled = bl.pooled_playbook([a, b], vectors, threshold=0.9)
    assert len(pooled) == 5 and pooled.loc[0, "merged"] == ["r2/L00"]
    assert pooled.loc[0, "helpful"] == a.loc[0, "helpful"] + b.loc[0, "helpful"]
    assert list(pooled["position"]) == list(range(5)) and pooled["lesson_id"].str.match(r"r[12]/L").all()
    K, n, m = 3, 600, 8 * 3
    design = practice_round(["t1", "t2"], n, m, seed=1, p=1 / K)
    rate = design[[f"z{j}" for j in range(m)]].to_numpy().mean()
    assert abs(rate - 1 / K) < 3 * np.sqrt((1 / K) * (1 - 1 / K) / (n * m))


def test_starred_methods_choose_on_the_evaluation_episodes():
    def eps(scores):
        return pd.DataFrame([{"candidate": f"tags_star:{rule}:{run}", "task_id": f"t{t}", "split": "eval",
                              "won": bool(w)} for (rule, run), ws in scores.items() for t, w in enumerate(ws)])
    table = eps({("net", "run1"): [1, 1, 0], ("net", "run2"): [1, 0, 0], ("helpful_count", "run1"): [1, 0, 0],
                 ("helpful_count", "run2"): [0, 0, 0]})
    out = bl.method_result("tags_star", table)
    assert out["chosen"] == "net" and out["score"] == pytest.approx(100 * (2 / 3 + 1 / 3) / 2)
    assert out["tuned_on"] == "evaluation tasks"
    flipped = bl.method_result("tags_star", eps({("net", "run1"): [0, 0, 0], ("helpful_count", "run1"): [1, 0, 1]}))
    assert flipped["chosen"] == "helpful_count"  # the evaluation scores decide
    rnd = pd.DataFrame([{"candidate": f"random:o{o}:run1", "task_id": "t", "split": "eval", "won": o == 1}
                        for o in (1, 2)])
    assert bl.method_result("random", rnd)["score"] == pytest.approx(50.0)  # mean of the two orders
    assert bl.method_result("random", rnd)["tuned_on"] is None
    sub = pd.DataFrame([{"candidate": f"subsampled:f{f}:run1", "task_id": "t", "split": "eval", "won": f == 100}
                        for f in (25, 50, 75, 100)])
    res = bl.method_result("subsampled", sub)
    assert res["score"] == 100.0 and res["variants"]["f25"] == 0.0  # the whole round's set is the method's score


def _setting(tmp_path, k_runs=2):
    """A setting's artifacts as the growth, practice and choice jobs write them (no episode played)."""
    from memtrials.io import write_parquet
    from memtrials.studies.playbook.records import PLAYBOOK_SCHEMA

    base = tmp_path / "results/playbook/std/loop/alfworld/ace-passfail"
    playbooks, practice = [], []
    for k in range(1, k_runs + 1):
        pb = playbook(6, seed=k)
        path = base / f"growth/run{k}.playbooks.parquet"
        write_parquet(pb, path, schema=PLAYBOOK_SCHEMA)
        playbooks.append(str(path))
        rec = base / f"practice/run{k}.json"
        rec.parent.mkdir(parents=True, exist_ok=True)
        design = practice_round(["t1", "t2"], 16, 3, seed=k)
        design.to_parquet(str(rec).replace(".json", ".design.parquet"))
        z = design[["z0", "z1", "z2"]].to_numpy()
        eps = pd.DataFrame({"episode_id": [f"p{k}/{i}" for i in design["episode"]], "design_episode": design["episode"],
                            "task": "heat the soup", "won": z[:, 0] == 1})
        eps.to_parquet(str(rec).replace(".json", ".parquet"))
        pd.DataFrame({"episode_id": eps["episode_id"], "step": 1, "action": "go to stove",
                      "observation": "ok"}).to_parquet(str(rec).replace(".json", ".steps.parquet"))
        pd.DataFrame({"lesson_id": pb["lesson_id"], "position": range(6), "block": [0, 0, 1, 1, 2, 2]}).to_parquet(
            str(rec).replace(".json", ".blocks.parquet"))
        pd.DataFrame({"block": [0, 1, 2], "estimate": [0.3, -0.1, 0.05]}).to_parquet(
            str(rec).replace(".json", ".estimates.parquet"))
        tok = dict(zip(pb["lesson_id"], pb["tokens"]))
        rec.write_text(json.dumps({"run": k, "p": 0.5, "curated": {"lesson_ids": ["L00"]}, "block_lessons": [
            {"block": j, "lesson_ids": [f"L{2 * j:02d}", f"L{2 * j + 1:02d}"],
             "tokens": int(tok[f"L{2 * j:02d}"] + tok[f"L{2 * j + 1:02d}"]), "example": "x"} for j in range(3)]}))
        practice.append(str(rec))
    choice = {"runs": [f"run{k}" for k in range(1, k_runs + 1)], "best_full": {"chosen": "whole:run2"}}
    return playbooks, practice, choice


def test_every_method_serves_from_the_setting_artifacts(tmp_path, loopback):
    from memtrials.studies.playbook.baseline_eval import served_variants
    from tests.conftest import base_config

    srv = loopback(policy=lambda body: json.dumps({"keep": ["L03", "L01"]}), embed_dim=16)
    cfg = memory_config(tmp_path, srv)
    playbooks, practice, choice = _setting(tmp_path)
    cell = {"seed": 1, "measurement": {"budget": 0.4, "curate_rule": "skip"},
            "roles": {"embedder": "emb", "curator": "loop", "judge": "loop", "judge_other": "loop"},
            "baselines": {**base_config()["playbook"]["baselines"], "runs": None}, "grouped": False,
            "cut_runs": list(choice["runs"])}

    async def serve(method):
        async with open_client(cfg, "tests/baselines", tmp_path / f"{method}.calls.parquet") as client:
            return await served_variants(method, cell, client, choice["runs"], playbooks, practice, choice, None,
                                         PROMPTS)

    counts = {}
    for method in bl.METHODS:
        if method == "pooled":
            continue
        out, notes = asyncio.run(serve(method))
        counts[method] = len(out)
        assert {run for _, run, _, _ in out} <= {"run1", "run2"}
    assert counts == {"random": 4, "own": 2, "top_k": 2, "tags_star": 16, "topk_star": 10, "dc_self": 2,
                      "dc_outcome": 2, "dgmem": 2, "best_full_cut": 1, "all_positive": 2, "judge": 2,
                      "judge_other": 2, "subsampled": 8}
    out, notes = asyncio.run(serve("all_positive"))
    assert notes["served"]["all_positive:run1"] == ["L00", "L01", "L04", "L05"]  # blocks 0 and 2, no cap
    out, notes = asyncio.run(serve("dc_outcome"))
    assert all(c["with_outcome"] for c in notes["calls"]) and len(notes["calls"]) == 2
    out, notes = asyncio.run(serve("subsampled"))
    assert [v for v, run, _, _ in out if run == "run1"] == ["f25", "f50", "f75", "f100"]
    out, _ = asyncio.run(serve("best_full_cut"))
    assert out[0][1] == "run2" and isinstance(out[0][2], bl.SimilarityView)  # Best-Full's run, cut per task


def test_table1_lists_every_baseline_with_what_it_saw(tmp_path):
    from memtrials.studies.playbook.report import table1_every, baseline_rows

    key = {"growth": "std", "model": "loop", "env": "alfworld", "variant": "ace-passfail"}
    meth = pd.DataFrame([{**key, "method": m, "candidate": "x", "score": s, "served_tokens": 0.0}
                         for m, s in (("No playbook", 50.0), ("Whole", 40.0), ("RBC", 60.0))])
    base = tmp_path / "results/playbook/std/loop/alfworld/ace-passfail/baseline"
    base.mkdir(parents=True)
    paths = []
    for method, score, chosen in (("tags_star", 55.0, "net"), ("random", 30.0, None)):
        label, _, sees = bl.METHODS[method]
        (base / f"{method}.json").write_text(json.dumps({"method": method, "result": {
            "label": label, "score": score, "chosen": chosen, "sees": sees}}))
        paths.append(str(base / f"{method}.json"))
    t = table1_every(meth, baseline_rows(paths)).set_index("method")
    assert t.loc["Tags*", "allowed to see"] == bl.EVALUATION and t.loc["Random", "allowed to see"] == bl.PRACTICE
    assert t.loc["RBC", "allowed to see"] == "practice only"
    assert t.loc["Random", "worst gap to No playbook"] == -20.0 and t.loc["Tags*", "mean"] == 55.0
    from memtrials.studies.playbook.report import comparison

    allm = pd.concat([meth, baseline_rows(paths)], ignore_index=True)
    adv = comparison(allm, ("RBC-cut", "Tags*", "Top-k*")).set_index("setting")
    assert list(adv.columns) == ["Tags*"] and adv.loc["mean", "Tags*"] == 55.0
    assert comparison(meth, ("No playbook", "RBC")).empty  # no baseline ran: no table
    from memtrials.studies.playbook.report import table17

    (base / "subsampled.json").write_text(json.dumps({"method": "subsampled", "result": {
        "label": "x", "score": 50.0, "chosen": None, "sees": bl.PRACTICE,
        "variants": {"f100": 50.0, "f25": 10.0, "f50": 20.0, "f75": 40.0}}}))
    t17 = table17([*paths, str(base / "subsampled.json")])
    assert list(t17.columns) == ["setting", "25 %", "50 %", "75 %", "100 %"] and t17["100 %"].tolist() == [50.0, 50.0]
    alone = table1_every(meth, pd.DataFrame()).set_index("method")
    assert list(alone.index) == ["No playbook", "Whole", "RBC"] and alone.loc["Whole", "allowed to see"] == "growth only"


def test_the_judge_checks_goals_without_the_outcome_and_its_labels_drive_the_estimate(tmp_path, loopback):
    from memtrials.studies.playbook.baseline_eval import served_variants
    from tests.conftest import base_config

    # the judge says yes exactly when block 1's lesson was shown: the planted judge effect is on block 1
    def policy(body):
        text = "\n".join(m["content"] for m in body["messages"])
        return "yes" if "lesson 2" in text else "no"

    srv = loopback(policy=policy, embed_dim=16)
    cfg = memory_config(tmp_path, srv)
    playbooks, practice, choice = _setting(tmp_path, k_runs=1)
    for p in practice:  # put the served lessons in the transcript
        design = pd.read_parquet(p.replace(".json", ".design.parquet"))
        eps = pd.read_parquet(p.replace(".json", ".parquet"))
        obs = ["shown: lesson 2" if z else "nothing" for z in design.sort_values("episode")["z1"]]
        pd.DataFrame({"episode_id": eps["episode_id"], "step": 1, "action": "look",
                      "observation": obs}).to_parquet(p.replace(".json", ".steps.parquet"))
    cell = {"seed": 1, "measurement": {"budget": 0.4, "curate_rule": "skip"},
            "roles": {"embedder": "emb", "curator": "loop", "judge": "loop", "judge_other": "loop"},
            "baselines": {**base_config()["playbook"]["baselines"], "runs": None}, "grouped": False,
            "cut_runs": list(choice["runs"])}
    calls = tmp_path / "judge.calls.parquet"

    async def serve():
        async with open_client(cfg, "tests/baselines", calls) as client:
            return await served_variants("judge", cell, client, choice["runs"], playbooks, practice, choice, None,
                                         PROMPTS)

    out, notes = asyncio.run(serve())
    rec = read_records(calls).to_pylist()
    assert len(rec) == 16 and {r["purpose"] for r in rec} == {"judge_goal_check"}
    for r in rec:
        prompt = "\n".join(m["content"] for m in json.loads(r["messages"]))
        assert "Outcome" not in prompt and "won" not in prompt and "heat the soup" in prompt
    assert notes["judge"]["run1"]["curated_blocks"] == [1]
    assert notes["served"]["judge:run1"] == ["L02", "L03"]


def test_one_job_per_method_and_setting_and_bad_keys_named():
    import copy

    from memtrials.config import ConfigError
    from tests.conftest import base_config
    from tests.playbook.helpers import workflow

    wf = workflow(base_config())
    paths = wf.baseline_paths()
    assert len(paths) == 5 and all("/std/smollm2/alfworld/ace-passfail/" in p for p in paths)  # the default: 1 x 4,
    assert [p for p in paths if p.endswith("/subsampled.json")] == [  # and Table 17's sets on one setting
        "results/playbook/std/smollm2/alfworld/ace-passfail/baseline/subsampled.json"]
    assert wf.diagnostics_inputs()["subsampled"] == [
        "results/playbook/std/smollm2/alfworld/ace-passfail/baseline/subsampled.parquet"]
    cfg = copy.deepcopy(base_config())
    cfg["playbook"]["baselines"].update(methods=list(bl.METHODS), envs=None, subsampled_settings=None)
    cfg["playbook"].update(long_growth=True, appworld_feedback=["pass_fail", "unit_tests"], exclude=[])  # 7 settings:
    # ALFWorld 2, AppWorld 3, WebShop 2 (ace-reward, dc); Tags* not on the 3 DC settings
    wf = workflow(cfg)
    assert "tags_star" in wf.baseline_methods("appworld", "ace-pertest")
    assert "tags_star" not in wf.baseline_methods("appworld", "dc") and "pooled" in wf.baseline_methods("alfworld", "dc")
    assert len(wf.baseline_paths()) == len(bl.METHODS) * 7 - 3 and not any("/long/" in p for p in wf.baseline_paths())
    assert wf.cell("baseline", "smollm2", "alfworld")["roles"]["judge"] == "smollm2"
    for key, value, match in (("methods", ["bogus"], "playbook.baselines.methods"),
                              ("k_values", [0], r"playbook\.baselines\.k_values(\[0\]|\.0)"),  # the schema: .0
                              ("cut_share", 0.0, "playbook.baselines.cut_share"),
                              ("subsampled_settings", ["alfworld:bogus"], "playbook.baselines.subsampled_settings")):
        bad = copy.deepcopy(base_config())
        bad["playbook"]["baselines"][key] = value
        with pytest.raises(ConfigError, match=match):
            workflow(bad)
