"""End to end on real AppWorld episodes and the loopback endpoint: two ACE growth runs, their
practice rounds, the candidates' scoring, every candidate's evaluation and the report.

The scripted policy (tests/playbook/helpers.py) solves every task when served a HELPFUL
lesson and no HARMFUL one, none when served a HARMFUL one, and half without lessons.  The
Curator plants three of each; the embedded all-MiniLM-L6-v2 embedder and Ward's method put
them in two blocks.  So the curated set must keep the helpful block and drop the harmful
one, and RBC's choice must beat the whole playbook on the evaluation tasks.  The jobs run
once for the module (one AppWorld engine shared by all of them); each test reads their outputs.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest

from memtrials.llm import read_records
from memtrials.testing import LoopbackServer
from tests.playbook.helpers import HARMFUL, HELPFUL, config, make_policy, paths, run_part, solutions, task_table, \
    workflow

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]  # one AppWorld engine for the module


def _run_baseline(cfg, base, tasks, method, make_env):
    """Rule playbook_baseline's job for ``method`` on the shared run (what its script calls)."""
    import asyncio

    from memtrials.studies.playbook.baseline_eval import baseline_run
    from tests.conftest import REPO

    pb, wf = cfg["playbook"], workflow(cfg)
    runs = range(1, int(pb["growth"]["runs"]) + 1)
    stem = str(base / f"baseline/{method}")
    return asyncio.run(baseline_run(
        cfg, model="loop", env="appworld", variant="ace-passfail", growth="std", method=method,
        cell=wf.cell("baseline", "loop", "appworld"), actor_prompts_dir=str(REPO / pb["actor_prompts_dir"]),
        prompts_dir=str(REPO / pb["baselines"]["prompts_dir"]), tasks_path=str(tasks),
        playbooks=[paths(base, "growth", k)["playbooks"] for k in runs],
        practice_records=[paths(base, "practice", k)["record"] for k in runs], choice_path=str(base / "choice.json"),
        pooled_record=None, out_episodes=stem + ".parquet", out_steps=stem + ".steps.parquet",
        out_calls=stem + ".calls.parquet", out_record=stem + ".json", make_env=make_env))


@pytest.fixture(scope="module")
def run(aw_root, aw_env, tmp_path_factory):
    """Two growth runs, their practice rounds, the choice and every candidate's evaluation."""
    tmp_path = tmp_path_factory.mktemp("playbook-e2e")
    srv = LoopbackServer(policy=make_policy(solutions(aw_root))).start()
    try:
        cfg = config(tmp_path, srv, aw_root)
        tasks = task_table(aw_root, tmp_path / "tasks.parquet")
        base = tmp_path / "results/playbook/std/loop/appworld/ace-passfail"
        for k in (1, 2):
            run_part(cfg, "growth", base, tasks, k=k, make_env=aw_env)
            run_part(cfg, "practice", base, tasks, k=k, make_env=aw_env)
        run_part(cfg, "choice", base, tasks, make_env=aw_env)
        cands = workflow(cfg).candidates()
        for c in cands:
            run_part(cfg, "eval", base, tasks, candidate=c, make_env=aw_env)
        _run_baseline(cfg, base, tasks, "own", aw_env)  # the cheapest baseline: no call beyond the actor's
    finally:
        srv.stop()
    pb = pd.read_parquet(paths(base, "growth", 1)["playbooks"])
    evals = pd.concat([pd.read_parquet(base / f"eval/{c}.parquet") for c in cands])
    return SimpleNamespace(tmp=tmp_path, cfg=cfg, tasks=tasks, base=base, cands=cands, pb=pb, evals=evals,
                           choice=json.loads((base / "choice.json").read_text()),
                           helpful_ids=set(pb.loc[pb["text"].isin(HELPFUL), "lesson_id"]),
                           harmful_ids=set(pb.loc[pb["text"].isin(HARMFUL), "lesson_id"]))


def test_growth_appends_the_planted_lessons_with_stable_ids(run):
    pb, base = run.pb, run.base
    # the planted lessons with stable ids, every pass's playbook as Parquet
    assert list(pb["text"]) == HELPFUL + HARMFUL and list(pb["pass"]) == [1] * 6
    assert list(pb["lesson_id"]) == [f"str-{i:05d}" for i in range(1, 7)]
    growth = json.loads((base / "growth/run1.json").read_text())
    assert growth["calls"]["ace_reflector"]["calls"] == 2 and growth["calls"]["ace_curator"]["calls"] == 1


def test_practice_blocks_split_helpful_from_harmful_and_the_curated_set_is_the_helpful_one(run):
    base, helpful_ids, harmful_ids = run.base, run.helpful_ids, run.harmful_ids
    for k in (1, 2):
        rec = json.loads((base / f"practice/run{k}.json").read_text())
        assert sorted(map(set, rec["blocks"]["blocks"]), key=sorted) == sorted([helpful_ids, harmful_ids], key=sorted)
        est = {b: e["estimate"] for b, e in enumerate(rec["estimates"])}
        helpful_block = next(b for b, ids in enumerate(rec["blocks"]["blocks"]) if set(ids) == helpful_ids)
        assert est[helpful_block] > 0 > est[1 - helpful_block]
        assert set(rec["curated"]["lesson_ids"]) == helpful_ids
        assert rec["curated"]["served_tokens"] <= 0.4 * rec["curated"]["whole_tokens"]
        design = pd.read_parquet(base / f"practice/run{k}.design.parquet")
        episodes = pd.read_parquet(base / f"practice/run{k}.parquet")
        # the inclusions are recorded per episode and were what the episode was served
        by_ep = episodes.set_index("design_episode")
        for row in design.itertuples(index=False):
            assert by_ep.loc[row.episode, "inclusion"] == f"{row.z0}{row.z1}"
        steps = pd.read_parquet(base / f"practice/run{k}.steps.parquet").set_index("episode_id")
        for _, ep in episodes.iterrows():
            z = ep["inclusion"]
            served = set(json.loads(steps.loc[ep["episode_id"], "memory_ids"]))
            want = set().union(*[set(rec["blocks"]["blocks"][b]) for b in range(2) if z[b] == "1"])
            assert served == want


def test_the_choice_reads_fresh_practice_episodes_only(run):
    base, choice, evals, tasks = run.base, run.choice, run.evals, run.tasks
    scores = pd.read_parquet(base / "choice.scores.parquet")
    assert set(scores["split"]) == {"practice"}
    table = pd.read_parquet(tasks).set_index("task_id")
    assert set(table.loc[scores["task_id"].unique(), "split"]) == {"practice"}
    assert set(scores["task_id"]).isdisjoint(set(evals["task_id"]))
    assert set(scores["episode_id"]).isdisjoint(set(evals["episode_id"]))
    practice_ids = set().union(*[set(pd.read_parquet(base / f"practice/run{k}.parquet")["episode_id"]) for k in (1, 2)])
    assert set(scores["episode_id"]).isdisjoint(practice_ids)
    choice_calls = set(read_records(base / "choice.calls.parquet").to_pandas()["request_digest"])
    for k in (1, 2):  # no model call of an estimate round is reused by the choice
        assert choice_calls.isdisjoint(set(read_records(base / f"practice/run{k}.calls.parquet").to_pandas()
                                           ["request_digest"]))
    assert choice["rbc"]["chosen"].startswith("curated:")
    assert choice["best_full"]["chosen"] in {"whole:run1", "whole:run2", "none"}


def test_evaluation_shares_tasks_and_seeds_and_rbc_beats_whole(run):
    evals, choice = run.evals, run.choice
    plan = {c: sorted(zip(e["task_id"], e["seed"])) for c, e in evals.groupby("candidate")}
    assert len({tuple(v) for v in plan.values()}) == 1 and len(plan) == 5
    score = evals.groupby("candidate")["won"].mean() * 100
    assert score[choice["rbc"]["chosen"]] == 100.0
    assert score["whole:run1"] == score["whole:run2"] == 0.0
    assert score["none"] == 100.0  # the evaluation split's one family is solved without lessons


def test_report_tables_figures_and_records(run):
    from memtrials.studies.playbook.report import write_report

    tmp_path, choice = run.tmp, run.choice
    w = workflow(run.cfg)
    tdir = tmp_path / "results/playbook/tables"
    inputs = {k: [str(tmp_path / p) for p in v if "/ace-passfail/" in p] for k, v in w.report_inputs().items()}
    write_report(growth=inputs["growth"], playbooks=inputs["playbooks"], practice=inputs["practice"],
                 choice=inputs["choice"], evals=inputs["eval"], calls=inputs["calls"], tables_dir=str(tdir),
                 figures_dir=str(tmp_path / "results/playbook/figures"), out_index=str(tdir / "index.md"))
    t1 = pd.read_csv(tdir / "table1_methods.csv").set_index("setting")
    row = t1.loc["ace-passfail · loop · appworld"]
    assert row["RBC"] == 100.0 and row["Whole"] == 0.0 and row["No playbook"] == 100.0 and row["RBC-cut"] == 100.0
    assert t1.loc["worst gap to No playbook", "RBC"] == 0.0 and t1.loc["worst gap to No playbook", "Whole"] == -100.0
    for stem in ("table5_growth_runs", "table10_parts", "table12_13_costs"):
        for ext in ("md", "csv", "tex"):
            assert (tdir / f"{stem}.{ext}").stat().st_size > 0
    costs = pd.read_csv(tdir / "table12_13_costs.csv").set_index("method")
    assert costs.loc["RBC", "episodes"] == 2 * 2 + 2 * 16 + 5 * 4  # growth + practice + scoring
    assert costs.loc["Best-Full", "choice_episodes"] == 3 * 4 and costs.loc["RBC", "reflector_curator_calls"] > 0
    for fig in ("figure2_runs", "figure6_runs"):
        assert (tmp_path / f"results/playbook/figures/{fig}.png").exists()
        assert (tmp_path / f"results/playbook/figures/{fig}.svg").exists()
    record = json.loads((tdir / "records/std__loop__appworld__ace-passfail.json").read_text())
    assert record["rbc"]["chosen"] == choice["rbc"]["chosen"]
    blocks = record["runs"][0]["blocks"]
    assert {b["example"] for b in blocks} <= set(HELPFUL + HARMFUL) and len(record["runs"][0]["estimates"]) == 2



def test_a_baseline_plays_the_evaluation_plan_within_budget_and_table1_lists_it(run):
    from memtrials.studies.playbook import baselines as bl
    from memtrials.studies.playbook.report import write_report

    base, evals = run.base, run.evals
    rec = json.loads((base / "baseline/own.json").read_text())
    eps = pd.read_parquet(base / "baseline/own.parquet")
    assert rec["method"] == "own" and rec["result"]["sees"] == bl.PRACTICE == "practice only"
    assert set(eps["candidate"]) == {"own:own:run1"} and set(eps["split"]) == {"eval"}  # baselines.runs: 1
    # the same evaluation tasks and seeds as every candidate; successes in [0, 1]
    assert sorted(zip(eps["task_id"], eps["seed"])) == sorted(zip(*[evals[evals["candidate"] == "none"][c]
                                                                    for c in ("task_id", "seed")]))
    assert eps["won"].astype(float).between(0, 1).all() and 0 <= rec["result"]["score"] <= 100
    whole = run.pb
    served = rec["served"]["own:run1"]
    assert served == [x for x in whole["lesson_id"] if x in set(bl.budget_set(whole, bl.own_rank(whole), 0.4))]
    budget = 0.4 * int(whole["tokens"].sum())
    assert set(eps["served_tokens"]) == {int(whole.set_index("lesson_id").loc[served, "tokens"].sum())}
    assert 0 < eps["served_tokens"].iloc[0] <= budget
    steps = pd.read_parquet(base / "baseline/own.steps.parquet")
    assert all(set(json.loads(x)) == set(served) for x in steps.groupby("episode_id")["memory_ids"].first())
    tdir = run.tmp / "results/playbook/tables-baseline"
    w = workflow(run.cfg)
    inputs = {k: [str(run.tmp / p) for p in v if "/ace-passfail/" in p] for k, v in w.report_inputs().items()}
    write_report(growth=inputs["growth"], playbooks=inputs["playbooks"], practice=inputs["practice"],
                 choice=inputs["choice"], evals=inputs["eval"], calls=inputs["calls"], tables_dir=str(tdir),
                 figures_dir=str(run.tmp / "results/playbook/figures-baseline"), out_index=str(tdir / "index.md"),
                 baselines=[str(base / "baseline/own.json")])
    t1 = pd.read_csv(tdir / "table1_every_method.csv").set_index("method")
    assert t1.loc["Own", "allowed to see"] == "practice only" and t1.loc["RBC", "allowed to see"] == "practice only"
    assert t1.loc["Own", "ace-passfail · loop · appworld"] == rec["result"]["score"]
