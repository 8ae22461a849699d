"""Training streams and evaluation on the loopback endpoint and real ScienceWorld: what each
episode was served follows the stream's order, evaluation leaves the memory unchanged and
never updates it, calls are counted per episode, and a stream killed with kill -9 and
rerun repeats no completed call and writes identical snapshots and results."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from memtrials.llm import read_records
from memtrials.memory.snapshot import read_snapshot
from memtrials.testing import Faults
from tests.conftest import base_config

from .helpers import job_config, policy, task_table

JOB = Path(__file__).with_name("stream_job.py")
SRC = str(Path(__file__).resolve().parents[2] / "src")


def child_env() -> dict[str, str]:
    """The environment of a job process, read after the loopback entry set its key variable."""
    return {**os.environ, "PYTHONPATH": SRC}
OUTPUTS = ("train.parquet", "train.steps.parquet", "train.calls.parquet", "memory.json", "rounds.json")


def prepare(srv, out: Path, cache: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    task_table(out / "tasks.parquet")
    cfg = job_config(base_config(), out, srv)
    cfg["cache"] = {"path": str(cache / "llm.sqlite"), "mode": "use", "backend": "sqlite"}
    cfg["request"] = {"timeout_s": 5.0, "max_retries": 4, "backoff_base_s": 0.01, "backoff_max_s": 0.1}
    (out / "cfg.json").write_text(json.dumps(cfg))
    return [sys.executable, str(JOB), str(out / "cfg.json"), str(out)]


@pytest.mark.slow
def test_reflexion_stream_serves_in_order_and_evaluation_is_frozen(loopback, tmp_path):
    srv = loopback(policy=policy, embed_dim=32)
    out = tmp_path / "run"
    subprocess.run(prepare(srv, out, tmp_path / "cache") + ["reflexion", "eval-rounds"], env=child_env(), check=True,
                   capture_output=True, timeout=400)
    train = pd.read_parquet(out / "train.parquet").sort_values(["round", "position"])
    steps = pd.read_parquet(out / "train.steps.parquet")
    # cross-task Reflexion (k = 3): an episode is served its task's reflections (the last three
    # failures), then other tasks' reflections up to k in all, written after earlier failures only
    failed_before: dict[str, int] = {}
    for _, ep in train.iterrows():
        own = min(3, failed_before.get(ep["task_id"], 0))
        others = sum(min(3, n) for t, n in failed_before.items() if t != ep["task_id"])
        assert ep["n_reflections_served"] == own + min(3 - own, others), ep["episode_id"]
        served = steps[steps["episode_id"] == ep["episode_id"]]["memory_ids"].map(json.loads)
        assert all(len(ids) == ep["n_reflections_served"] for ids in served)
        failed_before[ep["task_id"]] = failed_before.get(ep["task_id"], 0) + (not ep["won"])
    assert (train["phase"] == "train").all() and list(train["round"]) == [1, 1, 2, 2]
    # calls per episode: one actor call per step, one reflection per failure
    assert (train["execution_calls"] == train["n_steps"]).all()
    assert (train["synthesis_calls_total"] == (~train["won"]).astype(int)).all()
    calls = read_records(out / "train.calls.parquet").to_pandas()
    assert train["llm_calls"].sum() == len(calls[calls["endpoint"] == "loop"])
    rounds = json.loads((out / "rounds.json").read_text())
    assert [s["round"] for s in rounds["snapshots"]] == [1, 2]
    assert rounds["snapshots"][-1]["digest"] == read_snapshot(out / "memory.json")["digest"]
    # evaluation: memory frozen, digest unchanged, its episodes never reach the memory
    record = json.loads((out / "eval.json").read_text())
    assert record["memory_unchanged"] and record["memory_digest"] == read_snapshot(out / "memory.json")["digest"]
    every = pd.read_parquet(out / "eval.parquet")
    # every round's snapshot on the same held-out tasks with the same episode seeds; the final
    # round keeps the episode ids of a final-only evaluation
    assert sorted(every["round"].unique()) == [1, 2] and record["rounds_evaluated"] == [1, 2]
    r1, ev = every[every["round"] == 1], every[every["round"] == 2].reset_index(drop=True)
    assert list(r1["task_id"]) == list(ev["task_id"]) and list(r1["seed"]) == list(ev["seed"])
    assert all(e.endswith(f"/eval/{i:03d}") for i, e in enumerate(ev["episode_id"]))
    assert record["episodes"] == len(ev) and record["won"] == int(ev["won"].sum())
    round1 = [s for s in rounds["snapshots"] if s["round"] == 1][0]["state"]["reflections"]
    assert (r1["n_reflections_served"] == min(3, sum(len(v) for v in round1.values()))).all()
    assert (ev["phase"] == "eval").all() and (ev["synthesis_calls_total"] == 0).all()
    # the held-out tasks never occur in training, yet are served the training reflections
    assert (~train["won"]).any() and (ev["n_reflections_served"] == min(3, int((~train["won"]).sum()))).all()
    kept = json.dumps(read_snapshot(out / "memory.json")["state"])
    assert not any(eid in kept for eid in ev["episode_id"])
    eval_calls = read_records(out / "eval.calls.parquet").to_pandas()
    assert set(eval_calls[eval_calls["endpoint"] == "loop"]["purpose"]) == {"actor"}  # no reflection at evaluation


@pytest.mark.slow
def test_kill_9_mid_stream_then_rerun(loopback, tmp_path):
    from memtrials.llm.cache.sqlite import Cache

    srv = loopback(policy=policy, embed_dim=32, faults=Faults(latency_s=0.05))
    out, cache_dir = tmp_path / "run", tmp_path / "cache"
    cmd = prepare(srv, out, cache_dir) + ["autorefine"]
    proc = subprocess.Popen(cmd, env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    mark = out / "memory.json.work" / "round-02" / "batch-00000.json"  # round 1 done, round 2 under way
    deadline = time.monotonic() + 300
    while not mark.exists():
        assert proc.poll() is None and time.monotonic() < deadline, "the stream ended before it could be killed"
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "memory.json").exists()
    cache = Cache(cache_dir / "llm.sqlite")
    committed = len(cache.records())
    cache.close()
    srv.reset_stats()
    subprocess.run(cmd, env=child_env(), check=True, capture_output=True, timeout=400)
    cache = Cache(cache_dir / "llm.sqlite")
    total = len(cache.records())
    cache.close()
    # no completed call repeated, counted at the server (the cache holds one entry per embedded text)
    assert srv.stats.completions + srv.stats.embedded_texts == total - committed
    assert not (out / "memory.json.work").exists()
    # the resumed run equals a full replay of the same cache, byte for byte
    replay = tmp_path / "replay"
    srv.reset_stats()
    subprocess.run(prepare(srv, replay, cache_dir) + ["autorefine"], env=child_env(), check=True, capture_output=True, timeout=400)
    assert srv.stats.completions == srv.stats.embedded_texts == 0
    for name in OUTPUTS:
        assert (out / name).read_bytes() == (replay / name).read_bytes(), name
    rounds = json.loads((out / "rounds.json").read_text())
    assert len(rounds["snapshots"]) == 2 and rounds["calls"]["by_purpose"]["autorefine_synthesis"] == 4
