"""The generator's oracle reuses one engine per thread: same plans as a fresh engine, and a
game file rewritten at the same path (a retried attempt) is loaded afresh."""

from __future__ import annotations

import shutil
import threading

import pytest

from memtrials.envs.alfworld import solve as alfworld_solve
from memtrials.envs.alfworld.gen import write_game

pytestmark = pytest.mark.slow


def _fresh_plan(monkeypatch, gamefile: str) -> list[str] | None:
    monkeypatch.setattr(alfworld_solve, "_engines", threading.local())  # a new engine for this call
    return alfworld_solve.oracle_walkthrough(gamefile)


def test_reused_oracle_engine_plans_as_a_fresh_one(alf_games, tmp_path, monkeypatch):
    root, records = alf_games
    two = [r for r in records if r["spec"].task_type == "pick_two_obj_and_place"]
    assert two
    spec = two[0]["spec"]
    copy = tmp_path / "games"
    shutil.copytree(root, copy)
    gamefile = str(copy / spec.task_id / "game.tw-pddl")
    # the reused engine: first another game (a planner game), then this one
    other = next(r for r in records if r["spec"].task_type != "pick_two_obj_and_place")
    alfworld_solve._oracle_env(copy).reset(other["spec"].task_id)
    reused = alfworld_solve.oracle_walkthrough(gamefile)
    assert reused == two[0]["walkthrough"]
    # rewrite the same game file with another attempt: the reused engine must not keep the old game
    plans = {}
    for attempt in (1, 2):
        plan = write_game(copy, spec, attempt)  # solves with the reused engine (oracle)
        plans[attempt] = (plan, _fresh_plan(monkeypatch, str(copy / spec.task_id / "game.tw-pddl")))
    assert all(p == f for p, f in plans.values())
    assert plans[1][0] != plans[2][0] or plans[1][0] != reused  # the attempts differ from each other or the first
