"""Two workflow runs on one machine share its servers: the run that ends first must leave
them to the other (``end_run``), and the last one stops them (issue 39's review: a run
of other targets beside a run, or a checkout sharing its cache folder, stopped that run's
servers in the middle of its calls)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from memtrials.llm.local.shared import end_run
from memtrials.machine import alive, hold_run, other_runs
from tests.conftest import RUN_HOLDER

def _fake_server(folder: Path) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    info = folder / f"fake-{socket.gethostname()}.json"
    info.write_text(json.dumps({"pid": proc.pid, "endpoint": "fake"}), encoding="utf-8")
    return proc


def _gone(proc: subprocess.Popen, within: float = 10.0) -> bool:
    try:
        proc.wait(timeout=within)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_the_first_run_to_end_leaves_the_servers_to_the_other_and_the_last_stops_them(tmp_path):
    folder = tmp_path / "servers"
    folder.mkdir()
    server = _fake_server(folder)
    other = subprocess.Popen([sys.executable, "-c", RUN_HOLDER, str(folder)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout.readline().strip() == "held"
        hold_run(folder)
        assert end_run(folder) == ([], [other.pid])  # the other run still plays: nothing stopped
        assert alive(server.pid) and server.poll() is None
        assert not list((folder / "runs").glob(f"*-{os.getpid()}-*"))  # our lease is gone
    finally:
        other.stdin.close()
        other.wait(timeout=30)
    hold_run(folder)
    assert end_run(folder) == (["fake"], [])  # the last run stops them
    assert _gone(server)
    assert not (folder / f"fake-{socket.gethostname()}.json").exists()


def test_a_lease_of_a_dead_or_recycled_process_is_dropped(tmp_path):
    folder = tmp_path / "servers"
    runs = folder / "runs"
    runs.mkdir(parents=True)
    host = socket.gethostname()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    (runs / f"{host}-{int(dead.stdout)}-1").write_text("")       # killed run: its process is gone
    (runs / f"{host}-{os.getpid()}-1").write_text("")             # our pid, another process's start
    (runs / "otherhost-1-1").write_text("")                       # another machine's run: not ours to judge
    (runs / f"{host}-2-{os.getpid()}-1").write_text("")           # a machine named like ours plus "-2"
    assert other_runs(folder) == []
    assert sorted(p.name for p in runs.iterdir()) == sorted(["otherhost-1-1", f"{host}-2-{os.getpid()}-1"])
    server = _fake_server(folder)
    time.sleep(0.1)
    assert end_run(folder) == (["fake"], [])
    assert _gone(server)


def test_a_folder_that_cannot_be_written_gives_no_lease_and_a_warning(tmp_path, caplog):
    folder = tmp_path / "servers"
    folder.write_text("a file where the folder should be")  # mkdir fails as it would on a read-only copy
    assert hold_run(folder) is None
    assert "no run lease" in caplog.text and str(folder / "runs") in caplog.text
    assert end_run(folder) == ([], [])
