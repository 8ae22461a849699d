"""The anti-persistence study's known-answer run end to end (issue 38): training streams and
every round's held-out evaluation through the study's own functions, on the planted world with
the planted endpoint of config/models.yaml, then the tables with truth beside estimate; and the
wiring defect of issue 38 (the frozen snapshot of the wrong round served) failing a check."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest

from memtrials.envs.build import build_task_table
from memtrials.envs.tasks import write_table
from memtrials.studies.antipersist import known_answer as ka
from memtrials.studies.antipersist.planted_checks import round_table
from tests.conftest import REPO, base_config


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ka")
    cfg = copy.deepcopy(base_config())
    cfg["cache"] = {"path": str(tmp / "cache" / "llm.sqlite"), "mode": "use", "backend": "sqlite"}
    k = cfg["antipersist"]["known_answer"]
    k.update(designs=["fixed-imitation", "abstraction", "trajectory"], seeds=1, rounds=3, round_size=6)
    k["pool"].update(train_tasks=12, eval_tasks=3)
    tasks = tmp / "planted.parquet"
    write_table(build_task_table("planted", cfg["envs"]), tasks)
    summary = ka.known_answer_run(cfg, tasks_path=str(tasks), root=str(tmp / "results" / "antipersist"),
                                  out_dir=str(tmp / "ka"), prompts_dir=str(REPO / "config/prompts/memory"),
                                  actor_prompts_dir=str(REPO / "config/prompts/actor"))
    return tmp, summary


def test_tables_carry_truth_beside_estimate(run):
    tmp, summary = run
    t = {n: pd.read_csv(tmp / "ka" / "tables" / f"{n}.csv") for n in ("ka_modes", "ka_flaws", "ka_rounds")}
    modes = t["ka_modes"]
    assert set(modes["mode"]) >= {"imitation"} and {"truth", "covered", "lo", "hi"} <= set(modes.columns)
    assert modes["covered"].mean() >= 0.75, modes
    assert len(t["ka_flaws"]) == 1 and t["ka_flaws"]["truth"].iloc[0] == pytest.approx(0.5 * 0.25)
    assert list(t["ka_rounds"]["round"]) == [1, 2, 3] and t["ka_rounds"]["covered"].all()
    assert summary["intervals"] == len(modes) + 1 + 3  # modes, flaws, rounds


def test_mutation_the_wrong_rounds_snapshot_fails_the_round_check(run):
    """Each held-out round served another round's frozen snapshot (round r gets round r+1's
    episodes, the last round the first's): the trajectories served leave the plan."""
    tmp, _ = run
    ev = pd.read_parquet(next((tmp / "results").rglob("trajectory/seed1/eval.parquet")))
    ok = round_table(ev, round_size=6, k=3)
    assert ok["covered"].all()
    shifted = ev.assign(round=ev["round"].map({1: 3, 2: 1, 3: 2}))
    assert not round_table(shifted, round_size=6, k=3)["covered"].all()
