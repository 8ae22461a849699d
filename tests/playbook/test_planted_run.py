"""The playbook study's known-answer run end to end (issue 38): growth, practice rounds, choice
and evaluation of every candidate through the study's own job functions, on the planted world
with the planted endpoint of config/models.yaml (the real client, cache and records), then the
truth beside each estimate; and a wiring defect (Whole evaluated on another run than RBC-cut's)
that a known-answer check catches."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from memtrials.envs.build import build_task_table
from memtrials.envs.tasks import write_table
from memtrials.studies.playbook import known_answer as ka
from tests.conftest import REPO, base_config


def _config(tmp_path: Path) -> dict:
    """The default's known-answer setting (config/config.yaml), its cache under ``tmp_path``."""
    cfg = copy.deepcopy(base_config())
    cfg["cache"] = {"path": str(tmp_path / "cache" / "llm.sqlite"), "mode": "use", "backend": "sqlite"}
    return cfg


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ka")
    cfg = _config(tmp)
    tasks = tmp / "planted.parquet"
    write_table(build_task_table("planted", cfg["envs"]), tasks)
    summary = ka.known_answer_run(cfg, tasks_path=str(tasks), root=str(tmp / "results" / "playbook"),
                                  out_dir=str(tmp / "ka"), actor_prompts_dir=str(REPO / "config/prompts/actor"),
                                  memory_prompts_dir=str(REPO / "config/prompts/memory"))
    return tmp, cfg, summary


def _tables(tmp: Path) -> dict[str, pd.DataFrame]:
    return {n: pd.read_csv(tmp / "ka" / "tables" / f"{n}.csv") for n in ka.TABLES}


def test_truth_beside_estimate_and_rbc_finds_the_planted_blocks(run):
    tmp, cfg, summary = run
    t = _tables(tmp)
    assert set(t["ka_blocks"]["run"]) == {"run1", "run2"} and len(t["ka_blocks"]) == 16  # one block per lesson
    assert summary["coverage"] >= 0.8, summary  # 16 blocks + 5 candidates + 5 methods + 1 difference at 95 %
    cur = t["ka_curation"]
    # at 160 practice episodes a run H3 (Banzhaf 0.13) is not always told from a neutral block (the
    # simulated test with 1,600 episodes checks the whole best set; here run 1 took N2); H1, H2, X1 are
    assert cur["dropped_harmful"].all() and all({"H1", "H2"} <= set(c.split()) for c in cur["curated"]), cur
    assert cur["kept_helpful"].any() and (cur["curated_value"] >= cur["whole_value"] + 0.1).all(), cur
    m = t["ka_methods"].set_index("method")
    assert m.loc["RBC-cut - Whole", "truth"] >= 0.19
    assert abs(m.loc["RBC-cut - Whole", "estimate"] - m.loc["RBC-cut - Whole", "truth"]) < 0.12
    assert m.loc["RBC", "estimate"] > m.loc["Whole", "estimate"]
    # every model call went through the client and its records (a rerun replays from the cache)
    calls = pd.read_parquet(next((tmp / "results").rglob("practice/run1.calls.parquet")))
    assert len(calls) > 500 and set(calls["purpose"]) >= {"actor"}


def test_mutation_whole_evaluated_on_another_run_fails_a_known_answer_check(run):
    """The defect of issue 38: the baselines evaluated on another run than RBC-cut's.  Whole's
    evaluation episodes are taken from run 2 while the tables say run 1: the candidate's
    truth (run 1's whole playbook) leaves its interval, or the paired difference does."""
    tmp, cfg, _ = run
    base = tmp / "results" / "playbook" / "std" / "planted-playbook" / "planted" / "ace-passfail"
    rec = json.loads((base / "choice.json").read_text())
    plant = ka.plant_of(__import__("memtrials.config", fromlist=["load_models"]).load_models(
        str(REPO / "config/models.yaml")), "planted-playbook")
    from memtrials.studies.playbook import known_answer_tables as kt

    playbooks = [str(base / f"growth/run{k}.playbooks.parquet") for k in (1, 2)]
    truth = kt.candidate_truth(plant, rec, playbooks)
    assert abs(truth["whole:run1"][0] - truth["whole:run2"][0]) >= 0.1  # known_answer.seed chosen so
    evals = sorted(str(p) for p in (base / "eval").glob("*.parquet") if ".steps" not in p.name and ".calls" not in p.name)
    ok = pd.DataFrame(kt.method_rows(plant, ("std", "planted-playbook", "planted", "ace-passfail"), rec, playbooks, evals))
    assert ok.set_index("method").loc["Whole", "covered"]
    bad = tmp / "results" / "playbook" / "std" / "mutated" / "planted" / "ace-passfail" / "eval"
    shutil.copytree(base / "eval", bad)
    pd.read_parquet(bad / "whole-run2.parquet").assign(candidate="whole:run1").to_parquet(bad / "whole-run1.parquet")
    wrong = pd.DataFrame(kt.method_rows(plant, ("std", "mutated", "planted", "ace-passfail"), rec, playbooks,
                                        [p.replace(str(base / "eval"), str(bad)) for p in evals])).set_index("method")
    assert not wrong.loc["Whole", "covered"], wrong
