"""A rollout cell killed (SIGKILL) mid-run and rerun repeats no completed model call and
writes the same Parquet as an uninterrupted run (real ScienceWorld, loopback endpoint)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from memtrials.testing import Faults

SCRIPT = """
import asyncio, json, sys
from memtrials.envs.scienceworld.env import ScienceWorldEnv
from memtrials.seeds import seed_of
from memtrials.studies.history.design import actor_settings
from memtrials.studies.history.rollouts import rollout_cell
cfg = json.load(open(sys.argv[1])); out = sys.argv[2]
tasks = ["find-non-living-thing:0"]
s = actor_settings("loop", "shuffle_all", {"mode": "choice", "max_actions": 6, "max_output_tokens": 32})
asyncio.run(rollout_cell(cfg, model="loop", env="scienceworld", condition="shuffle_all", tasks=tasks,
    seeds=[seed_of(0, "scienceworld", t) for t in tasks], settings=s, actor_prompts_dir=sys.argv[3],
    in_flight=1, out_episodes=out + "/ep.parquet", out_steps=out + "/steps.parquet",
    out_calls=out + "/calls.parquet", make_env=ScienceWorldEnv))
"""
PROMPTS = str(Path(__file__).resolve().parents[2] / "config" / "prompts" / "actor")


def start(cfg: dict, out: Path, tmp: Path) -> subprocess.Popen:
    out.mkdir(parents=True, exist_ok=True)
    cfg_path = tmp / f"cfg-{out.name}.json"
    cfg_path.write_text(json.dumps(cfg))
    script = tmp / "cell.py"
    script.write_text(SCRIPT)
    return subprocess.Popen([sys.executable, str(script), str(cfg_path), str(out), PROMPTS],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def cached_ids(cfg: dict) -> set[str]:
    """Call ids of every completed call: the cache holds a call once its reply is in."""
    with sqlite3.connect(cfg["cache"]["path"]) as db:
        return {json.loads(r)["call_id"] for (r,) in db.execute("SELECT record FROM responses")}


@pytest.mark.slow
def test_kill_and_rerun_repeats_no_call_and_matches_clean_run(loopback, make_config, tmp_path):
    srv = loopback(policy={"random": 3}, faults=Faults(latency_s=0.15))
    cfg = make_config(srv, cache_dir=tmp_path / "killed" / "cache")
    proc = start(cfg, tmp_path / "killed", tmp_path)
    deadline = time.monotonic() + 120
    while srv.stats.completions < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
    os.killpg(proc.pid, signal.SIGKILL)  # the cell and its environment engines
    proc.wait()
    time.sleep(0.5)
    served_before = srv.stats.completions
    done_before = cached_ids(cfg)
    assert 0 < len(done_before) and not (tmp_path / "killed" / "ep.parquet").exists()

    proc = start(cfg, tmp_path / "killed", tmp_path)
    assert proc.wait(timeout=300) == 0, proc.stderr.read().decode()[-3000:]
    all_ids = set(pd.read_parquet(tmp_path / "killed" / "calls.parquet")["call_id"])
    # the rerun asked only for the calls that had not completed before the kill
    assert srv.stats.completions - served_before == len(all_ids - done_before)
    assert done_before <= all_ids

    first = {n: (tmp_path / "killed" / n).read_bytes() for n in ("ep.parquet", "steps.parquet", "calls.parquet")}
    # (a rerun of a finished cell replaying every call byte-identically: test_history_workflow.py)

    # an uninterrupted run (fresh cache) gives the same episodes and steps (latencies aside)
    clean_cfg = make_config(srv, name="loop", cache_dir=tmp_path / "clean" / "cache")
    proc = start(clean_cfg, tmp_path / "clean", tmp_path)
    assert proc.wait(timeout=300) == 0
    assert (tmp_path / "clean" / "ep.parquet").read_bytes() == first["ep.parquet"]
    a = pd.read_parquet(tmp_path / "clean" / "steps.parquet").drop(columns="latency_s")
    b = pd.read_parquet(tmp_path / "killed" / "steps.parquet").drop(columns="latency_s")
    pd.testing.assert_frame_equal(a, b)
    assert a["permutation"].notna().any()  # the shuffles were seeded identically
