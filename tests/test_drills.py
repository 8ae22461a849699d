"""The cheap reliability drills in their quick form (benchmarks/drill_configs.py,
benchmarks/drill_keys.py, benchmarks/drill_netfs.py): their printed figures say no
malformed config got past the entry points (and every ``config check`` rejection named
file, key and fix), no file of a run holds the key, and the shards cache keeps one paid
call per key and identical records across simulated hosts on a real network filesystem
(sshfs).  The heavy drills (faults, kill -9, bad outputs) are benchmarks."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _drill(name: str, *args: str) -> tuple[str, dict[str, str]]:
    out = subprocess.run([sys.executable, str(REPO / "benchmarks" / f"drill_{name}.py"), *args],
                         cwd=REPO / "benchmarks", capture_output=True, text=True, timeout=900)
    lines = out.stdout.strip().splitlines()
    assert lines, out.stderr[-3000:]
    figure = lines[-1]
    assert figure.startswith(f"{name}:"), out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout, dict(re.findall(r"(\w+)=(\S+)", figure))


def test_config_drill_rejects_every_variant_before_any_call():
    text, fig = _drill("configs", "--quick")
    assert int(fig["variants"]) >= 20 and int(fig["runs"]) >= int(fig["variants"])
    assert fig["missed"] == "0", text[-4000:]
    checks = re.search(r"config check (\d+)/(\d+) precise", text)
    assert checks and checks.group(1) == checks.group(2), text[-4000:]


def test_key_drill_finds_no_key_in_any_file():
    text, fig = _drill("keys", "--quick")
    assert int(fig["files_scanned"]) > 3, text
    assert fig["hits"] == "0", text
    sent, total = fig["requests_with_key"].split("/")
    assert int(total) > 0 and sent == total, text


def test_netfs_drill_keeps_one_paid_call_per_key_across_hosts_on_sshfs():
    text, fig = _drill("netfs", "--keys", "12")
    if fig.get("ran") == "no":
        assert fig["missing"] == "0", "bin/setup-envs installs sshfs and sftp-server:\n" + text
        pytest.skip("this machine refuses a FUSE mount or a UTS namespace (drill_netfs.py says which)")
    assert fig["ok"] == "yes", text[-4000:]
    assert fig["race_calls"] == "12/12" and fig["rerun_requests"] == "0", text
    assert fig["entries"] == "24/24" and fig["duplicates"] == "0", text
