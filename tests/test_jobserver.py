"""The job server (memtrials.pipeline.jobserver, its warm-up memtrials.pipeline.jobwarmup, and
memtrials.pipeline.jobclient): a real Snakemake rule through it and in its own process, a failing
script's status and stderr, kill -9 of the job's process, a new server for edited code, the
fallback, off under Slurm.  Real processes throughout."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from memtrials.pipeline import jobclient
from memtrials.envs.process import forkserver
from memtrials.machine import alive
from memtrials.pipeline.rule_entry import COST_LINE
from memtrials.testing import LoopbackServer, loopback_endpoint
from tests.conftest import REPO, RUN_HOLDER, run_snakemake, failure_text
from tests.test_workflow import loop_overlay, registry

# What Snakemake's preamble does before a script runs: a ``snakemake`` object in the globals,
# ``__file__`` the script's path; here the object is a plain namespace with a config.
DRIVER = """
import json, sys, types
opts = json.loads(sys.argv[2])
snakemake = types.SimpleNamespace(config=opts["config"], what=opts["what"], out=opts.get("out"))
__file__ = sys.argv[1]
exec(compile(open(__file__).read(), __file__, "exec"))
"""

SCRIPT = """
from memtrials.pipeline.jobclient import hand_over
hand_over(snakemake, __file__)  # noqa: F821
import json, os, sys, time
from memtrials.pipeline import jobclient
what = snakemake.what  # noqa: F821
with open(snakemake.out, "w") as fh:  # noqa: F821
    json.dump({"pid": os.getpid(), "served": jobclient.SERVED, "cwd": os.getcwd(),
               "env": os.environ.get("MEMTRIALS_TEST_VAR"), "argv": sys.argv}, fh)
print("to stdout", flush=True)
print("to stderr", file=sys.stderr, flush=True)
if what == "raise":
    raise ValueError("boom from the job")
if what == "sleep":
    time.sleep(120)
if what == "message":
    sys.exit("a message on exit")
sys.exit(int(what))
"""


def _config(tmp_path: Path, on: bool = True, idle_s: float = 20) -> dict:
    return {"servers": {"job_server": on, "idle_s": idle_s, "shared": True},
            "cache": {"path": str(tmp_path / "cache" / "llm.sqlite")}}


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in jobclient.CLUSTER_VARIABLES}
    env.update({"PYTHONPATH": str(REPO / "src"), "MEMTRIALS_TEST_VAR": "from the job", **extra})
    return env


def _job(tmp_path: Path, what: str, config: dict | None = None, env: dict | None = None, wait: bool = True):
    scripts = tmp_path / "scripts"
    scripts.mkdir(exist_ok=True)
    script = scripts / "job.py"
    if not script.exists():
        script.write_text(SCRIPT)
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    out = tmp_path / f"out-{what}.json"
    opts = {"config": config or _config(tmp_path), "what": what, "out": str(out)}
    cmd = [sys.executable, str(driver), str(script), json.dumps(opts)]
    if not wait:
        return subprocess.Popen(cmd, cwd=tmp_path, env=env or _env(), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True), out
    proc = subprocess.run(cmd, cwd=tmp_path, env=env or _env(), capture_output=True, text=True, timeout=120)
    return proc, (json.loads(out.read_text()) if out.exists() else None)


def _servers(tmp_path: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in (tmp_path / "cache" / "servers").glob("jobserver-*.json")]


def _stop(tmp_path: Path) -> None:
    for info in _servers(tmp_path):
        try:
            os.kill(int(info["pid"]), signal.SIGTERM)
        except ProcessLookupError:
            pass


@pytest.fixture
def scratch(tmp_path: Path):
    yield tmp_path
    _stop(tmp_path)


def test_exit_status_stderr_environment_and_cost_through_the_server(scratch):
    proc, got = _job(scratch, "0")
    assert proc.returncode == 0, proc.stderr
    assert got["served"] is not None and got["pid"] != got["served"]["client_pid"]  # ran in a forked child
    assert got["cwd"] == str(scratch) and got["env"] == "from the job" and got["argv"][0].endswith("driver.py")
    assert "to stdout" in proc.stdout and "to stderr" in proc.stderr and "unavailable" not in proc.stderr
    assert got["served"]["client_cpu_s"] > 0 and got["served"]["started_at"] <= time.time()
    proc, _ = _job(scratch, "3")
    assert proc.returncode == 3
    proc, got = _job(scratch, "raise")
    assert proc.returncode == 1 and got["served"] is not None
    assert "ValueError: boom from the job" in proc.stderr and 'job.py", line' in proc.stderr
    assert "jobserver.py" not in proc.stderr  # the traceback a job's own process would print
    proc, _ = _job(scratch, "message")
    assert proc.returncode == 1 and "a message on exit" in proc.stderr
    servers = _servers(scratch)
    assert len(servers) == 1 and alive(int(servers[0]["pid"]))
    log_path = next((scratch / "cache" / "servers").glob("jobserver-*.log"))
    t0 = time.monotonic()  # the server logs a child once it has reaped it, just after the job's status
    while log_path.read_text().count(") exited") < 4 and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    log = log_path.read_text()
    assert re.search(r"jobserver: ready \(pid \d+, warm-up [0-9.]+ CPU-s", log)
    assert re.findall(r"jobserver: child \d+ \(job process \d+\) exited (\d+), [0-9.]+ CPU-s", log) == ["0", "3", "1", "1"]


def test_kill_9_of_the_job_process_ends_its_child(scratch):
    proc, out = _job(scratch, "sleep", wait=False)
    deadline = time.monotonic() + 60
    while not out.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    child = json.loads(out.read_text())
    assert child["served"] is not None and child["pid"] != proc.pid
    assert alive(child["pid"])
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    t0 = time.monotonic()
    while alive(child["pid"]) and time.monotonic() - t0 < 10:
        time.sleep(0.05)
    state = Path(f"/proc/{child['pid']}/stat")
    assert not state.exists() or state.read_text().rsplit(")", 1)[1].split()[0] == "Z", "the child outlived its job"
    servers = _servers(scratch)
    assert servers and alive(int(servers[0]["pid"]))  # the server stays


def test_an_edit_gets_a_new_server_and_the_idle_server_stops(scratch):
    import shutil

    src = scratch / "src"  # a copy of the package, so that a module of it can be edited
    shutil.copytree(REPO / "src" / "memtrials", src / "memtrials", ignore=shutil.ignore_patterns("__pycache__"))
    env = _env(PYTHONPATH=str(src))
    config = _config(scratch, idle_s=3)
    _, first = _job(scratch, "0", config=config, env=env)
    _, again = _job(scratch, "0", config=config, env=env)
    assert first["served"] is not None and first["served"]["server_pid"] == again["served"]["server_pid"]
    module = src / "memtrials" / "studies" / "history" / "entry.py"
    module.write_text(module.read_text() + "\n# edited\n")
    _, edited = _job(scratch, "0", config=config, env=env)
    assert edited["served"] is not None and edited["served"]["server_pid"] != first["served"]["server_pid"]
    script = scratch / "scripts" / "job.py"
    script.write_text(script.read_text() + "\n# edited\n")
    _, script_edited = _job(scratch, "0", config=config, env=env)
    servers = {first["served"]["server_pid"], edited["served"]["server_pid"], script_edited["served"]["server_pid"]}
    assert len(servers) == 3
    t0 = time.monotonic()
    while any(alive(pid) for pid in servers) and time.monotonic() - t0 < 20:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in servers)
    assert not _servers(scratch)


def test_fallback_when_no_server_can_start(scratch):
    (scratch / "cache").mkdir()
    (scratch / "cache" / "servers").write_text("a file where the servers' folder goes")
    proc, got = _job(scratch, "0")
    assert proc.returncode == 0 and got["served"] is None  # ran in its own process
    assert "job server: unavailable" in proc.stderr and "running the job in its own process" in proc.stderr
    proc, got = _job(scratch, "raise")
    assert proc.returncode == 1 and got["served"] is None and "ValueError: boom from the job" in proc.stderr


def test_off_under_slurm_and_when_the_key_is_off(scratch):
    proc, got = _job(scratch, "0", env=_env(SLURM_JOB_ID="4242"))
    assert proc.returncode == 0 and got["served"] is None and "job server" not in proc.stderr
    proc, got = _job(scratch, "0", config=_config(scratch, on=False))
    assert proc.returncode == 0 and got["served"] is None and "job server" not in proc.stderr
    assert not (scratch / "cache" / "servers").exists()
    assert jobclient.CLUSTER_VARIABLES == forkserver.CLUSTER_VARIABLES


def test_warm_up_imports_the_scripts_modules_but_no_sdk_or_engine():
    code = ("import os, sys, threading; from memtrials.pipeline.jobwarmup import warm_up, denied_loaded, script_modules; "
            "failed = warm_up('workflow/scripts'); print(failed, denied_loaded(), threading.active_count(), "
            "len(script_modules('workflow/scripts')), 'pandas' in sys.modules, "
            "'scipy.stats' in sys.modules and 'sklearn.linear_model' in sys.modules, "
            "','.join(sorted({open(f'/proc/self/task/{t}/comm').read().strip() for t in os.listdir('/proc/self/task')})))")
    # the BLAS thread variables Snakemake sets for a one-thread job (they are in the server's key)
    blas = {v: "1" for v in jobclient.KEY_ENV if v.endswith("_THREADS")}
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         env=_env(**blas))
    assert out.returncode == 0, out.stderr
    got = out.stdout.split()
    assert got[:3] == ["[]", "[]", "1"] and int(got[3]) > 10 and got[4:6] == ["True", "True"]
    # SciPy and scikit-learn (the playbook jobs') loaded and no thread started: only pyarrow's
    # jemalloc background thread, which jemalloc restarts after a fork, besides the main one
    assert set(got[6].split(",")) <= {"python", "jemalloc_bg_thd"}


def test_every_script_hands_over_first():
    import ast

    for path in sorted((REPO / "workflow" / "scripts").glob("*.py")):
        body = ast.parse(path.read_text()).body
        if isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # the docstring
        first, second = (ast.unparse(node) for node in body[:2])
        assert first == "from memtrials.pipeline.jobclient import hand_over", path.name
        assert second in ("hand_over(snakemake, __file__)", "hand_over(globals().get('snakemake'), __file__)"), path.name


def _smoke(workdir: Path, overlay: Path, env: dict, *extra: str):
    return run_snakemake(workdir, "--configfile", str(overlay), *extra, "--", "results/smoke/loop.parquet", env=env)


def test_a_real_rule_gives_the_same_outputs_through_the_server_and_in_its_own_process(workflow_copy):
    with LoopbackServer(policy={"script": ["Paris"]}) as srv:
        (workflow_copy / "models.yaml").write_text(registry(loopback_endpoint(srv)))
        overlay = loop_overlay(workflow_copy)
        on = workflow_copy / "on.yaml"
        off = workflow_copy / "off.yaml"
        base = yaml.safe_load(overlay.read_text())
        on.write_text(yaml.safe_dump({**base, "servers": {"job_server": True}}))
        off.write_text(yaml.safe_dump({**base, "servers": {"job_server": False}}))
        env = {"PYTHONPATH": str(REPO / "src")}
        first = _smoke(workflow_copy, off, env)  # the one model call; the reruns replay it
        assert first.returncode == 0, failure_text(first)
        outputs = sorted((workflow_copy / "results" / "smoke").glob("loop*"))
        assert len(outputs) == 3  # answer, calls, spec
        runs = {}
        for name, cfg in (("on", on), ("off", off)):
            out = _smoke(workflow_copy, cfg, env, "--force")
            assert out.returncode == 0, failure_text(out)
            runs[name] = {p.name: p.read_bytes() for p in outputs}
            log = (workflow_copy / "logs" / "smoke" / "loop.log").read_text()
            assert ("job server: forked by pid" in log) == (name == "on"), log
            cost = [COST_LINE.search(ln) for ln in log.splitlines() if COST_LINE.search(ln)]
            assert len(cost) == 1 and float(cost[0]["cpu"]) > 0 and float(cost[0]["wall"]) > 0
            if name == "on":
                assert "stopped shared servers: jobserver" in out.stderr  # the run's end stops it
                server_log = next((workflow_copy / "results" / "cache" / "servers").glob("jobserver-*.log")).read_text()
                assert "warm-up" in server_log and "exited 0" in server_log
                assert not list((workflow_copy / "results" / "cache" / "servers").glob("jobserver-*.json"))
        assert srv.stats.completions == 1
        assert runs["on"] == runs["off"]
        # another run on the machine holds the servers (a cell rerun beside the whole pipeline):
        # this run's end leaves them to it, and its own run lease is gone
        servers = workflow_copy / "results" / "cache" / "servers"
        holder = subprocess.Popen([sys.executable, "-c", RUN_HOLDER, str(servers)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True, env={**os.environ, **env})
        try:
            assert holder.stdout.readline().strip() == "held"
            out = _smoke(workflow_copy, on, env, "--force")
            assert out.returncode == 0, failure_text(out)
            assert f"left the shared servers running: another run holds them (pid {holder.pid})" in out.stderr
            assert "stopped shared servers" not in out.stderr
            assert list(servers.glob("jobserver-*.json"))
            assert [p.name.split("-")[-2] for p in (servers / "runs").iterdir()] == [str(holder.pid)]
        finally:
            holder.stdin.close()
            holder.wait(timeout=30)
        # a failing job through the server (a response cache that is no database): its status
        # and its traceback reach Snakemake
        (workflow_copy / "results" / "cache" / "llm.sqlite").write_bytes(b"not a database " * 100)
        out = _smoke(workflow_copy, on, env, "--force")
        assert out.returncode != 0
        assert "Error in rule smoke" in out.stderr and "file is not a database" in out.stderr, out.stderr[-3000:]
        def server_logs() -> str:  # one server per Snakemake run: its sys.path has the run's source cache
            return "".join(p.read_text() for p in (workflow_copy / "results" / "cache" / "servers").glob("jobserver-*.log"))

        t0 = time.monotonic()
        while "exited 1" not in server_logs() and time.monotonic() - t0 < 10:
            time.sleep(0.05)
        assert "exited 1" in server_logs()
