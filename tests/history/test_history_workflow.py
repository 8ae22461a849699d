"""The history study through Snakemake on the loopback endpoint and real ScienceWorld:
rollouts -> continuation -> probe -> report, then one cell forced again (no new call,
identical Parquet)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from memtrials.testing import Faults, LoopbackServer, loopback_endpoint
from tests.conftest import copy_workflow, failure_text

from .helpers import is_judge, is_review, wrap

REPO = Path(__file__).resolve().parents[2]


def policy(body):
    if is_judge(body):
        return '{"supports_repetition": false}'
    if is_review(body):
        return '{"decision":"CALIBRATE","experience":"Looking around again shows the same room."}'
    return wrap(body, "look around")


def default_roles() -> list[str]:
    with open(REPO / "config" / "config.yaml") as fh:
        return sorted(set(yaml.safe_load(fh).get("roles") or {}) | {"judge", "calibrator"})


def snakemake(workdir: Path, *args: str, cores: str = "2") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "--cores", cores, *args], cwd=workdir,
                          capture_output=True, text=True, timeout=900, env={**os.environ})


def cached_ids(wf: Path) -> set[str]:
    """Call ids of every completed call: the cache holds a call once its reply is in."""
    with sqlite3.connect(wf / "results" / "cache" / "llm.sqlite") as db:
        return {json.loads(r)["call_id"] for (r,) in db.execute("SELECT record FROM responses")}


def kill_then_rerun(wf: Path, srv: LoopbackServer, target: str, wait_s: float = 120) -> tuple[int, set[str]]:
    """Run ``target`` (with ``overlay.yaml``) in ``wf``, kill -9 the whole run once the
    server has answered 3 calls, unlock and run it again to the end.  Returns the calls the
    server had answered and the ids of the calls completed (cached) at the kill."""
    args = [sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "overlay.yaml", "--", target]
    proc = subprocess.Popen(args, cwd=wf, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + wait_s
    while srv.stats.completions < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert proc.poll() is None, f"the run ended (rc {proc.returncode}) before it could be killed: rerun the " \
                                "command in the test's folder to see why"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(0.5)
    served, done = srv.stats.completions, cached_ids(wf)
    assert done, "nothing completed before the kill"
    assert snakemake(wf, "--configfile", "overlay.yaml", "--unlock", "--", target).returncode == 0
    out = snakemake(wf, "--configfile", "overlay.yaml", "--", target, cores="1")
    assert out.returncode == 0, failure_text(out)
    return served, done


@pytest.mark.slow
def test_history_workflow_end_to_end(tmp_path):
    wf = copy_workflow(tmp_path / "wf")
    tasks = pd.DataFrame({"task_id": ["find-non-living-thing:0", "lifespan-longest-lived:0", "find-plant:0"],
                          "env": "scienceworld", "split": "test",
                          "type": ["find-non-living-thing", "lifespan-longest-lived", "find-plant"],
                          "source": "official", "detail": "{}"})
    (wf / "results" / "tasks").mkdir(parents=True)
    tasks.to_parquet(wf / "results" / "tasks" / "scienceworld.parquet")
    with LoopbackServer(policy=policy, faults=Faults(latency_s=0.1)) as srv:
        minilm = yaml.safe_load((REPO / "config/models.yaml").read_text())["endpoints"]["minilm"]
        registry = {"loop": loopback_endpoint(srv), "minilm": minilm}
        (wf / "models.yaml").write_text(yaml.safe_dump({"endpoints": registry}))
        overlay = {
            # every role of the default config on the one endpoint (an overlay merges into roles)
            "models_file": "models.yaml", "panel": ["loop"],
            "roles": {r: "loop" for r in default_roles() if r != "embedder"},
            "history": {
                "enabled": True, "envs": ["scienceworld"], "splits": {"scienceworld": "test"}, "seed": 1,
                # the full game, as the scripted policy's repeated pairs were written for (the default
                # config plays ScienceWorld with the `easy` simplification)
                "env_options": {"scienceworld": {"simplification": ""}},
                "task_types": {"scienceworld": None},  # every type of the test's own table
                "tasks_per_cell": 1, "in_flight": 1, "conditions": ["raw", "shuffle_all"],
                "chat_conditions": [],
                "actor": {"mode": "choice", "max_actions": 4, "max_output_tokens": 32, "max_listed_actions": 10},
                "continuation": {"enabled": True, "sources_per_cell": 1, "conditions": [],
                                 "chat_conditions": ["reference"]},
                "probe": {"enabled": True}, "analysis": {"n_boot": 200}},
            # this table holds ScienceWorld's test split only, so the studies that draw from its
            # train split are off (every enabled study's task counts are checked at parse time)
            "calibrator": {"enabled": False}, "antipersist": {"enabled": False},
        }
        (wf / "overlay.yaml").write_text(yaml.safe_dump(overlay))
        # kill -9 the whole run in the middle of its first rollout cell, then run again
        served, done = kill_then_rerun(wf, srv, "results/history/tables/index.md")
        res = wf / "results" / "history"
        all_ids = set().union(*(set(pd.read_parquet(p)["call_id"]) for p in res.rglob("*.calls.parquet")))
        assert done <= all_ids and srv.stats.completions - served == len(all_ids - done)  # nothing repeated
        eps = {c: pd.read_parquet(res / f"rollouts/loop/scienceworld/{c}.parquet")
               for c in ("raw", "shuffle_all")}
        assert len({tuple(e["task_id"]) for e in eps.values()}) == 1  # paired: the same tasks everywhere
        assert {tuple(e["seed"]) for e in eps.values()} == {tuple(eps["raw"]["seed"])}
        assert (res / "continuation/loop/scienceworld/reference-chat.parquet").exists()
        probe = pd.read_parquet(res / "probe/loop/scienceworld.parquet")
        assert set(probe["condition"]) == {"raw", "causal", "experience"} and probe["repeated"].all()
        index = (res / "tables" / "index.md").read_text()
        for name in ("table2_success", "table3_repetition", "table11_chat_recovery", "figure5_repetition"):
            assert name in index
        assert (res / "figures" / "figure5_repetition.png").exists()
        assert (wf / "logs/history/rollouts/loop/scienceworld/raw.log").exists()

        cell = "results/history/rollouts/loop/scienceworld/shuffle_all.parquet"
        before = (wf / cell).read_bytes()
        n = srv.stats.completions
        out = snakemake(wf, "--configfile", "overlay.yaml", "--force", "--", cell)
        assert out.returncode == 0, failure_text(out)
        assert srv.stats.completions == n and (wf / cell).read_bytes() == before
