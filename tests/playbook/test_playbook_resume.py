"""kill -9 during a growth run and during a practice round, then a rerun: no completed model
call is repeated (counted at the server) and the outputs equal an uninterrupted replay.

Also the growth driver's stop rule: a pass that adds nothing stops a ``std`` run after it;
a ``long`` run plays every pass; every pass's playbook is in the run's Parquet.  All on
ALFWorld's generated games (the cheap real engine: resuming does not depend on the
benchmark) with the loopback server's hash embeddings.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from memtrials.llm.cache.sqlite import Cache
from memtrials.testing import Faults
from tests.conftest import REPO
from tests.playbook.helpers import HARMFUL, HELPFUL, alf_policy, config, paths, run_part, task_table

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
TIMING = ["latency_s", "started_at", "finished_at"]


def _cached(cfg: dict) -> int:
    cache = Cache(cfg["cache"]["path"])
    n = len(cache.records())
    cache.close()
    return n


def _answered(srv) -> int:
    """Calls the server answered: completions, embedded texts and token counts (each one cache entry)."""
    return srv.stats.completions + srv.stats.embedded_texts + srv.stats.tokenize_requests


def _proc(cfg: dict, part: str, base: Path, tasks: Path, work: Path, k: int = 1) -> list[str]:
    work.mkdir(parents=True, exist_ok=True)
    args = work / f"{part}-args.json"
    args.write_text(json.dumps({"config": cfg, "part": part, "base": str(base), "tasks": str(tasks), "k": k}))
    return [sys.executable, str(Path(__file__).with_name("job_cell.py")), str(args)]


def _same(a: dict[str, str], b: dict[str, str]) -> None:
    for key in a:
        if key == "calls":
            assert pq.read_table(a[key]).drop(TIMING).equals(pq.read_table(b[key]).drop(TIMING)), key
        elif key == "steps":
            pd.testing.assert_frame_equal(pd.read_parquet(a[key]).drop(columns=["latency_s"]),
                                          pd.read_parquet(b[key]).drop(columns=["latency_s"]))
        else:
            assert Path(a[key]).read_bytes() == Path(b[key]).read_bytes(), key


def _kill_rerun_replay(srv, cfg, part, tasks, tmp_path, ready) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    base = tmp_path / "run/results/playbook/std/loop/alfworld/ace-passfail"
    proc = subprocess.Popen(_proc(cfg, part, base, tasks, tmp_path / "w1"), env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while not ready(base):
        assert proc.poll() is None and time.monotonic() < deadline, f"the {part} job ended before it could be killed"
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    out = paths(base, part)
    assert not Path(out["episodes"]).exists()
    committed = _cached(cfg)
    srv.reset_stats()
    subprocess.run(_proc(cfg, part, base, tasks, tmp_path / "w2"), env=env, check=True, capture_output=True,
                   timeout=900)
    assert _answered(srv) == _cached(cfg) - committed  # no completed call repeated
    replay = tmp_path / "replay/results/playbook/std/loop/alfworld/ace-passfail"
    if part == "practice":  # the practice round reads the growth run's playbook
        Path(paths(replay, "growth")["playbooks"]).parent.mkdir(parents=True)
        Path(paths(replay, "growth")["playbooks"]).write_bytes(Path(paths(base, "growth")["playbooks"]).read_bytes())
    srv.reset_stats()
    subprocess.run(_proc(cfg, part, replay, tasks, tmp_path / "w3"), env=env, check=True, capture_output=True,
                   timeout=900)
    assert _answered(srv) == 0
    _same(out, paths(replay, part))


def _setup(alf_root, loopback, tmp_path, latency_s: float = 0.0, **playbook):
    srv = loopback(policy=alf_policy(), faults=Faults(latency_s=latency_s), embed_dim=64)
    playbook = {"measurement__practice_tasks": 2, "measurement__episodes": 4, **playbook}  # two practice games
    cfg = config(tmp_path, srv, alf_root, env="alfworld", embedder="loop", **playbook)
    return srv, cfg, task_table(alf_root, tmp_path / "tasks.parquet", "alfworld")


def test_kill_during_growth_resumes_without_repeating_a_call(alf_root, loopback, tmp_path):
    srv, cfg, tasks = _setup(alf_root, loopback, tmp_path, 0.05, growth__batch_size=1)

    def ready(base: Path) -> bool:  # the first batch's checkpoint: the kill lands in batch 2
        return (base / "growth/run1.json.work/pass-1/batch-00000.json").exists()

    _kill_rerun_replay(srv, cfg, "growth", tasks, tmp_path, ready)
    assert not (tmp_path / "run/results/playbook/std/loop/alfworld/ace-passfail/growth/run1.json.work").exists()


def test_kill_during_a_practice_round_resumes_without_repeating_a_call(alf_root, loopback, tmp_path):
    srv, cfg, tasks = _setup(alf_root, loopback, tmp_path, 0.1)
    base = tmp_path / "run/results/playbook/std/loop/alfworld/ace-passfail"
    run_part(cfg, "growth", base, tasks)
    before = _cached(cfg)  # the lessons' embeddings are cached by growth's merge: the kill lands after 4 of 8 actor calls
    _kill_rerun_replay(srv, cfg, "practice", tasks, tmp_path, lambda b: _cached(cfg) >= before + 4)


def test_stop_rule_and_long_growth_write_every_pass(alf_root, loopback, tmp_path):
    srv, cfg, tasks = _setup(alf_root, loopback, tmp_path, growth__max_passes=3, growth__long_passes=2,
                             growth__runs=1)
    std = tmp_path / "results/playbook/std/loop/alfworld/ace-passfail"
    run_part(cfg, "growth", std, tasks)
    rec = json.loads(Path(paths(std, "growth")["record"]).read_text())
    # pass 1 grows from nothing (infinite growth); pass 2 adds nothing (< 10 %): the run stops
    assert [p["n_lessons"] for p in rec["passes"]] == [6, 6] and [p["stop"] for p in rec["passes"]] == [False, True]
    assert rec["passes"][1]["grew_by"] == 0.0 and rec["passes"][0]["grew_by"] is None
    pb = pd.read_parquet(paths(std, "growth")["playbooks"])
    assert sorted(set(pb["pass"])) == [1, 2]
    p1, p2 = pb[pb["pass"] == 1], pb[pb["pass"] == 2]
    assert list(p1["lesson_id"]) == list(p2["lesson_id"])  # stable ids, nothing removed
    # tags: every lesson was shown to both pass-2 episodes and tagged helpful by each Reflector call
    assert list(p1["helpful"]) == [0] * 6 and list(p2["helpful"]) == [2] * 6
    assert set(p2["text"]) == set(HELPFUL + HARMFUL)
    # pass 2's Curator added a copy of the first lesson: merged into it, its id never reused
    state = rec["memory"]["state"]
    assert state["counter"] == 7 and [m["kept"] for m in state["history"][-1]["merges"]] == ["str-00001"]
    assert state["history"][-1]["merges"][0]["absorbed"] == ["str-00007"]
    long = tmp_path / "results/playbook/long/loop/alfworld/ace-passfail"
    run_part(cfg, "growth", long, tasks, growth="long")
    rec = json.loads(Path(paths(long, "growth")["record"]).read_text())
    assert rec["n_passes"] == 2 and not rec["stop_rule"] and not any(p["stop"] for p in rec["passes"])
