"""Shared ScienceWorld JVMs (memtrials.envs.scienceworld.jvm): a borrowed JVM gives what a fresh
one gives, byte for byte; one borrower at a time; a killed borrower frees it; idle ones retire;
the run's end stops them; configured from the pipeline config, off under a cluster executor."""

from __future__ import annotations

import copy
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from memtrials.envs.scienceworld import jvm as jvms
from memtrials.envs.scienceworld.engine import JVM_OPTIONS
from memtrials.envs.scienceworld.env import ScienceWorldEnv
from memtrials.machine import read_info



def play(env: ScienceWorldEnv, tasks=("find-non-living-thing:286", "lifespan-longest-lived:110"), seed=5, n=6):
    """Observations and (sorted) action lists of a seeded random walk over ``tasks``."""
    rng, out = random.Random(seed), []
    for task in tasks:
        out.append(env.reset(task).text)
        for _ in range(n):
            acts = sorted(env.admissible_actions())
            act = rng.choice(acts)
            out.append([act, env.step(act).text, acts])
    return out


@pytest.fixture
def folder(tmp_path):
    from memtrials.llm.local.shared import stop_all

    d = tmp_path / "servers"
    yield d
    stop_all(d)


def running(pid: int) -> bool:
    """Alive and not a zombie (a supervisor this test started stays one until reaped)."""
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def infos(folder):
    return sorted(folder.glob("scienceworld-jvm-*.json"))


def fresh_output():
    """The reference episode played in a JVM of its own."""
    own = ScienceWorldEnv(simplification="easy", shared_jvm=False)
    try:
        return play(own)
    finally:
        own.close()


def test_a_borrowed_jvm_gives_a_fresh_jvms_output_and_is_reused(folder):
    fresh = fresh_output()
    first = ScienceWorldEnv(simplification="easy", shared_jvm=(str(folder), 60.0))
    pid = first._lease.java_pid
    play(first, tasks=("boil:3", "melt:2", "find-animal:40"), seed=1, n=15)  # other work in that JVM first
    first.close()
    assert len(infos(folder)) == 1
    again = ScienceWorldEnv(simplification="easy", shared_jvm=(str(folder), 60.0))
    try:
        assert again._lease.java_pid == pid  # the idle JVM was lent again, not a new one started
        assert play(again) == fresh
    finally:
        again.close()
    assert jvms.LENT_CPU_S[0] > 0  # the JVM's CPU while lent counts as the borrower's


def test_a_jvm_lent_to_an_environment_process_counts_in_the_parents_cost(folder):
    """An environment in a child process (``ProcessEnv``, as the anti-persistence study runs them)
    borrows the JVM; its CPU while lent is no process's child, so the child's close reply carries
    it and the parent adds it to the job's count."""
    from memtrials.envs.process.child import ProcessEnv

    before = jvms.LENT_CPU_S[0]
    env = ProcessEnv("scienceworld", {"simplification": "easy", "shared_jvm": (str(folder), 60.0)})
    try:
        assert not env.forked
        env.reset("find-non-living-thing:286")
        for _ in range(3):
            env.step(sorted(env.admissible_actions())[0])
    finally:
        env.close()
    assert len(infos(folder)) == 1  # the child borrowed a shared JVM
    assert jvms.LENT_CPU_S[0] > before


def test_one_borrower_at_a_time(folder):
    a = ScienceWorldEnv(shared_jvm=(str(folder), 60.0))
    b = ScienceWorldEnv(shared_jvm=(str(folder), 60.0))
    try:
        assert a._lease.java_pid != b._lease.java_pid and len(infos(folder)) == 2
    finally:
        a.close()
        b.close()
    c = ScienceWorldEnv(shared_jvm=(str(folder), 60.0))
    try:
        assert c._lease.java_pid in {a._lease.java_pid, b._lease.java_pid} and len(infos(folder)) == 2
    finally:
        c.close()


HOLDER = """
import sys, time
from memtrials.envs.scienceworld.env import ScienceWorldEnv
env = ScienceWorldEnv(simplification="easy", shared_jvm=(sys.argv[1], 60.0))
env.reset("boil:0")
env.step("look around")
print(env._lease.java_pid, flush=True)
time.sleep(600)
"""


def test_a_killed_borrower_frees_its_jvm(folder):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        held = int(proc.stdout.readline())
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    fresh = fresh_output()
    env = ScienceWorldEnv(simplification="easy", shared_jvm=(str(folder), 60.0))
    try:
        assert env._lease.java_pid == held
        assert play(env) == fresh
    finally:
        env.close()


def test_an_idle_jvm_retires_and_the_runs_end_stops_the_rest(folder):
    from memtrials.llm.local.shared import stop_all

    short = ScienceWorldEnv(shared_jvm=(str(folder), 1.0))
    short_info = read_info(infos(folder)[0])
    short.close()
    deadline = time.monotonic() + 30
    while (running(short_info["java_pid"]) or running(short_info["pid"])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not running(short_info["java_pid"]) and not running(short_info["pid"]) and not infos(folder)
    kept = ScienceWorldEnv(shared_jvm=(str(folder), 600.0))
    kept.close()
    kept_info = read_info(infos(folder)[0])
    assert running(kept_info["java_pid"])
    assert stop_all(folder) == ["scienceworld-jvm"]
    deadline = time.monotonic() + 30
    while running(kept_info["java_pid"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not running(kept_info["java_pid"]) and not infos(folder)


def test_no_supervisor_means_an_own_jvm(tmp_path, caplog):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    env = ScienceWorldEnv(shared_jvm=(str(blocked / "servers"), 60.0))
    try:
        assert env._lease is None and env.reset("boil:0").text
    finally:
        env.close()
    assert "no shared JVM" in caplog.text


def test_configured_from_the_pipeline_config(monkeypatch, tmp_path):
    from tests.conftest import base_config

    cfg = copy.deepcopy(base_config())
    cfg["cache"] = dict(cfg["cache"], path=str(tmp_path / "cache" / "llm.sqlite"))
    assert cfg["envs"]["scienceworld"]["shared_jvm"] is True  # the default
    monkeypatch.delenv(jvms.SWITCH, raising=False)
    for var in ("SLURM_JOB_ID", "KUBERNETES_SERVICE_HOST"):
        monkeypatch.delenv(var, raising=False)
    jvms.configure(cfg)
    assert jvms.settings() == {"dir": str((tmp_path / "cache" / "servers").resolve()),
                               "idle_s": float(cfg["servers"]["idle_s"])}
    assert json.loads(os.environ[jvms.SWITCH])["idle_s"] == cfg["servers"]["idle_s"]
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    jvms.configure(cfg)
    assert jvms.settings() is None
    monkeypatch.delenv("SLURM_JOB_ID")
    cfg["envs"]["scienceworld"]["shared_jvm"] = False
    jvms.configure(cfg)
    assert jvms.settings() is None
    with pytest.raises(ValueError, match="true or false"):
        jvms.configure({"envs": {"scienceworld": {"shared_jvm": "yes"}}})


def test_the_key_follows_the_jvm_options():
    assert jvms.jvm_key(JVM_OPTIONS) != jvms.jvm_key((*JVM_OPTIONS, "-Xint"))


def test_java_tool_options_follow_the_users_and_are_restored(monkeypatch):
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    with jvms.java_tool_options(("-XX:hashCode=2", "-Xss4m")):
        assert os.environ["JAVA_TOOL_OPTIONS"] == "-XX:hashCode=2 -Xss4m"
    assert "JAVA_TOOL_OPTIONS" not in os.environ
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xmx1g")
    with pytest.raises(RuntimeError):
        with jvms.java_tool_options(("-XX:hashCode=2",)):
            assert os.environ["JAVA_TOOL_OPTIONS"] == "-Xmx1g -XX:hashCode=2"  # the user's first, ours win
            raise RuntimeError
    assert os.environ["JAVA_TOOL_OPTIONS"] == "-Xmx1g"
