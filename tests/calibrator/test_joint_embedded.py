"""The constrained joint reply on the embedded SmolLM2 (llama.cpp takes the grammar): on a real
ScienceWorld episode with the default's joint-actor settings, every reply is one valid
calibration block followed by one of the listed actions (free, this model never wrote a valid
block: docs/calibrator.md)."""

from __future__ import annotations

import asyncio
import json

import pandas as pd
import pytest

from memtrials.agent.parse import parse_joint
from memtrials.studies.history.calibrator.jointactor import joint_rollouts
from tests.calibrator.test_joint_actor import CP, HP, TASK
from tests.conftest import embedded_config


@pytest.mark.slow
@pytest.mark.embedded
def test_embedded_joint_replies_are_valid_blocks_and_listed_actions(tmp_path):
    cfg = embedded_config(tmp_path)
    j = cfg["calibrator"]["joint"]
    actor = {**cfg["history"]["actor"], "max_actions": 3}
    tasks = tmp_path / "tasks.parquet"
    pd.DataFrame({"task_id": [TASK], "split": ["test"], "type": ["find"]}).to_parquet(tasks)
    cell = {"tasks_per_cell": 1, "split": "test", "seed": 0, "actor": actor, "in_flight": 1,
            "env_options": cfg["history"]["env_options"].get("scienceworld") or {}, "reply": j["reply"],
            "max_experience_chars": j["max_experience_chars"]}
    out = {k: str(tmp_path / f"joint{x}.parquet") for k, x in (("ep", ""), ("steps", ".steps"), ("calls", ".calls"))}
    asyncio.run(joint_rollouts(cfg, arm="joint", model="smollm2", env="scienceworld", cell=cell,
                               max_output_tokens=j["max_output_tokens"], actor_prompts_dir=HP, calibrator_prompts_dir=CP,
                               tasks_path=str(tasks), out_episodes=out["ep"], out_steps=out["steps"],
                               out_calls=out["calls"]))
    steps = pd.read_parquet(out["steps"]).sort_values("step")
    assert len(steps) >= 1 and (steps["constraint"] == "grammar").all()
    for r in steps.to_dict("records"):
        cal, parsed = parse_joint(r["raw_reply"], json.loads(r["shown_actions"]))
        assert cal.status == "ok" and cal.decision in ("CALIBRATE", "NOUPDATE"), r["raw_reply"]
        assert parsed.status == "ok" and r["parse_status"] == "ok", r["raw_reply"]
        assert r["action"] in json.loads(r["shown_actions"])
    # rows 1..n-1 carry the review written by the next reply: never INVALID under the grammar
    assert steps["review_decision"].iloc[:-1].isin(["CALIBRATE", "NOUPDATE"]).all()
