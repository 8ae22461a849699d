"""One embedded server per endpoint and machine, shared by concurrent cells (issue 14):
cells in separate processes use one server; it stops itself once no live cell holds it
(a killed cell's lease is dropped), and the run's end stops it at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from memtrials.machine import alive
from memtrials.llm.local.shared import server_dir, stop_all
from tests.conftest import REPO, embedded_config

CELL = r"""
import asyncio, json, sys, time
import yaml
from memtrials.llm import open_client
cfg = yaml.safe_load(open(sys.argv[1]))
release = sys.argv[3]   # hold the server until this file exists ("-": do not hold)
def held():
    import os
    return release != "-" and not os.path.exists(release)
async def main():
    async with open_client(cfg, "test/" + sys.argv[2], None) as client:
        r = await client.complete("smollm2", [{"role": "user", "content": "Say " + sys.argv[2]}], max_tokens=4)
        srv = client.server("smollm2")
        info = json.loads(srv.info.read_text())
        print(json.dumps({"pid": info["pid"], "started": srv.started, "text": r.text}), flush=True)
        deadline = time.monotonic() + 300
        while held() and time.monotonic() < deadline:
            time.sleep(0.1)
asyncio.run(main())
"""


def _config(tmp_path: Path, idle_s: float) -> Path:
    cfg = embedded_config(tmp_path, servers={"shared": True, "idle_s": idle_s})
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _cell(cfg: Path, name: str, release: Path | None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", CELL, str(cfg), name, str(release or "-")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "src")})


def _wait_gone(pid: int, info: Path, within: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < within:
        if not alive(pid) and not info.exists():
            return time.monotonic() - t0
        time.sleep(0.2)
    raise AssertionError(f"shared server {pid} still running after {within} s (info {info.exists()})")


@pytest.mark.slow
@pytest.mark.embedded
def test_concurrent_cells_share_one_server_which_stops_when_idle(tmp_path):
    cfg = _config(tmp_path, idle_s=2.0)
    first = _cell(cfg, "alpha", release=tmp_path / "release")
    line = first.stdout.readline()
    assert line, first.stderr.read()
    a = json.loads(line)
    second = _cell(cfg, "beta", release=None)   # starts while the first still holds the server
    out, err = second.communicate(timeout=120)
    b = json.loads(out.strip().splitlines()[-1])
    (tmp_path / "release").touch()
    first.communicate(timeout=60)
    assert first.returncode == 0 and second.returncode == 0, err
    assert a["started"] and not b["started"] and a["pid"] == b["pid"]   # one server, two cells
    info = next(server_dir(yaml.safe_load(cfg.read_text())).glob("smollm2-*.json"))
    # both cells gone: the server stops itself after idle_s and removes its registration
    assert _wait_gone(a["pid"], info, within=20.0) >= 0


@pytest.mark.slow
@pytest.mark.embedded
def test_a_killed_cell_does_not_keep_the_server_and_the_run_end_stops_it(tmp_path):
    cfg = _config(tmp_path, idle_s=1.0)
    cell = _cell(cfg, "gamma", release=tmp_path / "never")
    a = json.loads(cell.stdout.readline())
    os.kill(cell.pid, signal.SIGKILL)          # its lease stays behind, its process does not
    cell.wait()
    folder = server_dir(yaml.safe_load(cfg.read_text()))
    info = next(folder.glob("smollm2-*.json"))
    _wait_gone(a["pid"], info, within=20.0)
    # a new cell starts a new server; the run's end (onsuccess/onerror) stops it at once
    cell = _cell(cfg, "delta", release=tmp_path / "never")
    b = json.loads(cell.stdout.readline())
    assert b["started"] and b["pid"] != a["pid"]
    assert stop_all(folder) == ["smollm2"]
    cell.kill()
    cell.wait()
    _wait_gone(b["pid"], info, within=10.0)
