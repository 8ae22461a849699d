"""Environment fork servers (``envs.fork_server``): forked children play exactly as spawned
ones, jobs share one server per machine, a killed job's child exits, an idle server stops.

One AppWorld server for the module (its warm-up is the slow part); the lifecycle tests use
ALFWorld servers (imports only, a few CPU-seconds).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memtrials.envs.process import forkserver
from memtrials.envs.process.child import ProcessEnv
from memtrials.machine import read_info
from tests.envs.conftest import REPO

pytestmark = pytest.mark.slow


def _gone(pid: int) -> bool:
    """Exited and reaped, or a zombie (exited, its parent not yet polled)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait(cond, timeout: float = 60.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.2)
    return cond()


def _infos(folder: Path) -> list[dict]:
    return [read_info(p) for p in sorted(folder.glob("envfork-*.json"))]


def _ppid(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _play(env, task_id: str, actions, seed: int = 3, random_steps: int = 0) -> list:
    """Every observation of an episode (all fields), then ``random_steps`` random actions."""
    out = [dataclasses.asdict(env.reset(task_id)), env.task_description()]
    for a in actions:
        out.append(dataclasses.asdict(env.step(a)))
    rng = random.Random(seed)
    if random_steps:
        env.reset(task_id)
        for _ in range(random_steps):
            a = env.random_action(rng)
            obs = env.step(a)
            out.append((a, dataclasses.asdict(obs)))
            if obs.done:
                break
    out.append(rng.getstate())
    return out


@pytest.fixture(scope="module")
def aw_root(tmp_path_factory):
    """Variant 1 of every AppWorld family, verified from the checked-in manifest (a subprocess:
    AppWorld fixes its root per process)."""
    root = tmp_path_factory.mktemp("appworld_fork") / "root"
    code = ("import sys; from memtrials.envs.appworld.data import build_root; "
            "from memtrials.envs.appworld.manifest import MANIFEST, load_manifest; "
            "build_root(sys.argv[1], seed=0, max_variants=1, workers=1, verified=load_manifest(MANIFEST), sample=0)")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    proc = subprocess.run([sys.executable, "-c", code, str(root)], capture_output=True, text=True, timeout=900,
                          env=env, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return root


@pytest.fixture
def servers(tmp_path):
    """Fork servers registered in a fresh folder; every one stopped afterwards."""
    from memtrials.llm.local.shared import stop_all

    folder = tmp_path / "servers"
    forkserver.use(folder, idle_s=60)
    yield folder
    forkserver.use(None)
    stop_all(folder)


@pytest.fixture(scope="module")
def aw_servers(tmp_path_factory):
    """One folder (so one AppWorld fork server) for the module's AppWorld tests."""
    from memtrials.llm.local.shared import stop_all

    folder = tmp_path_factory.mktemp("aw_servers")
    yield folder
    forkserver.use(None)
    stop_all(folder)


def test_appworld_forked_episode_equals_spawned(aw_root, aw_servers):
    servers = aw_servers
    forkserver.use(servers, idle_s=60)
    task = "hsnotecreate_1"
    actions = ["print(apis.supervisor.show_account_passwords())", "print(undefined_name)"]
    forked = ProcessEnv("appworld", {"root": aw_root})
    try:
        assert forked.forked and _ppid(forked.pid) == _infos(servers)[0]["pid"]
        got = _play(forked, task, actions + forked.gold_actions(task), random_steps=6)
    finally:
        forked.close()
    forkserver.use(None)
    spawned = ProcessEnv("appworld", {"root": aw_root})
    try:
        assert not spawned.forked
        want = _play(spawned, task, actions + spawned.gold_actions(task), random_steps=6)
    finally:
        spawned.close()
    assert got == want
    assert got[len(actions) + 2]["won"]  # the gold action passed AppWorld's evaluator


def test_alfworld_forked_episode_equals_spawned_and_reports_its_cpu(alf_games, servers):
    root, records = alf_games
    task, walk = records[0]["spec"].task_id, list(records[0]["walkthrough"])
    cpu0 = forkserver.FORKED_CPU_S[0]
    forked = ProcessEnv("alfworld", {"root": root})
    assert forked.forked
    got = _play(forked, task, walk + ["fly to the moon"], random_steps=10)
    forked.close()
    assert forkserver.FORKED_CPU_S[0] > cpu0  # the child's CPU, for the job's cost line
    forkserver.use(None)
    spawned = ProcessEnv("alfworld", {"root": root})
    want = _play(spawned, task, walk + ["fly to the moon"], random_steps=10)
    spawned.close()
    assert got == want and got[len(walk) + 1]["won"]


CLIENT = """
import json, sys, time
from memtrials.envs.process import forkserver
from memtrials.envs.process.child import ProcessEnv
forkserver.use(sys.argv[1], idle_s=60)
env = ProcessEnv(sys.argv[4], {"root": sys.argv[2]})
if sys.argv[3] == "hang":
    env.reset("hsnotecreate_1")
print(json.dumps({"forked": env.forked, "child": env.pid}), flush=True)
if sys.argv[3] == "hang":
    env.step("while True:\\n    pass")  # never returns
time.sleep(600)
"""


def _client(folder: Path, root: Path, mode: str, name: str = "alfworld") -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    return subprocess.Popen([sys.executable, "-c", CLIENT, str(folder), str(root), mode, name],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)


def test_a_job_killed_mid_step_takes_its_forked_child_with_it(aw_root, aw_servers):
    client = _client(aw_servers, aw_root, "hang", "appworld")
    try:
        child = json.loads(client.stdout.readline())["child"]
        time.sleep(2.0)
        assert not _gone(child)  # busy in the endless step
        client.send_signal(signal.SIGKILL)
        client.wait()
        assert _wait(lambda: _gone(child), 30), "the forked child of a killed job is still running its step"
    finally:
        client.kill()
        client.wait()


def test_two_jobs_share_one_server_and_a_killed_jobs_child_exits(tmp_path, servers):
    first, second = _client(servers, tmp_path, "hold"), _client(servers, tmp_path, "hold")
    try:
        a, b = (json.loads(p.stdout.readline()) for p in (first, second))
        assert a["forked"] and b["forked"] and a["child"] != b["child"]
        (info,) = _infos(servers)
        assert _ppid(a["child"]) == _ppid(b["child"]) == info["pid"]
        first.send_signal(signal.SIGKILL)
        first.wait()
        assert _wait(lambda: _gone(a["child"])), "the killed job's forked child is still running"
        assert not _gone(b["child"])  # the other job's child is untouched
    finally:
        for p in (first, second):
            p.kill()
            p.wait()
    assert _wait(lambda: _gone(b["child"]))


def test_idle_server_stops_and_a_later_job_starts_a_new_one(tmp_path):
    folder = tmp_path / "servers"
    forkserver.use(folder, idle_s=1)
    try:
        env = ProcessEnv("alfworld", {"root": tmp_path})
        (info,) = _infos(folder)
        env.close()
        assert _wait(lambda: _gone(info["pid"]) and not _infos(folder)), "the idle fork server did not stop"
        again = ProcessEnv("alfworld", {"root": tmp_path})
        assert again.forked and _infos(folder)[0]["pid"] != info["pid"]
        again.close()
    finally:
        forkserver.use(None)
        from memtrials.llm.local.shared import stop_all

        stop_all(folder)


def test_run_end_stops_fork_servers(tmp_path, servers):
    from memtrials.llm.local.shared import stop_all

    env = ProcessEnv("alfworld", {"root": tmp_path})
    env.close()
    (info,) = _infos(servers)
    assert any(s.startswith("envfork-alfworld") for s in stop_all(servers))
    assert _wait(lambda: _gone(info["pid"])) and not _infos(servers)


def test_unavailable_server_falls_back_to_a_spawned_child(tmp_path, servers, monkeypatch, caplog):
    def broken(*args, **kwargs):
        raise forkserver.Unavailable("the server exited (code 1) while starting; see x.log")

    monkeypatch.setattr(forkserver, "_start", broken)
    with caplog.at_level(logging.WARNING, logger="memtrials.envs.process.child"):
        env = ProcessEnv("alfworld", {"root": tmp_path})
    try:
        assert not env.forked and env.task_description() == ""
    finally:
        env.close()
    assert "no fork server" in caplog.text and "spawning a child instead" in caplog.text


def test_config_turns_fork_servers_on_and_cluster_jobs_keep_them_off(tmp_path, monkeypatch):
    cfg = {"envs": {"fork_server": True}, "servers": {"idle_s": 7}, "cache": {"path": str(tmp_path / "c" / "x.db")}}
    for var in forkserver.CLUSTER_VARIABLES:
        monkeypatch.delenv(var, raising=False)
    try:
        forkserver.configure(cfg)
        assert forkserver.settings() == {"dir": str(tmp_path / "c" / "servers"), "idle_s": 7.0}
        forkserver.configure({**cfg, "envs": {"fork_server": False}})
        assert forkserver.settings() is None
        monkeypatch.setenv("SLURM_JOB_ID", "42")
        forkserver.configure(cfg)
        assert forkserver.settings() is None
    finally:
        forkserver.use(None)
