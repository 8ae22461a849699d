"""The workflow profile ``profiles/default`` is loaded by a plain ``snakemake`` run, sets what
it says, and lets a run killed between a job's last write and Snakemake's bookkeeping be
rerun with no extra flag (its ``rerun-incomplete``).

Snakemake 9 takes ``profiles/default`` in the current folder or beside the Snakefile as the
workflow profile unless ``--workflow-profile`` names another (or ``none``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from memtrials.testing import LoopbackServer, loopback_endpoint
from tests.conftest import REPO, failure_text, run_snakemake
from tests.test_workflow import loop_overlay, registry

USING = "Using workflow specific profile profiles/default for setting default command line arguments."
TARGET = "results/smoke/loop.parquet"


def default_profile() -> dict[str, Any]:
    return yaml.safe_load((REPO / "profiles" / "default" / "config.yaml").read_text())


def parsed(workdir: Path, monkeypatch: pytest.MonkeyPatch, *argv: str) -> Any:
    """Snakemake's command line arguments for ``argv`` in ``workdir``, profiles applied."""
    from snakemake.cli import parse_args

    monkeypatch.chdir(workdir)
    return parse_args(list(argv))[1]


def settings(args: Any) -> dict[str, Any]:
    """The keys ``profiles/default`` sets, as Snakemake read them (in the profile's spelling)."""
    return {
        "scheduler": args.scheduler,
        "resources": [f"{name}={res.value}" for name, res in sorted((args.resources or {}).items())],
        "rerun-triggers": sorted(t.name.lower() for t in args.rerun_triggers),
        "keep-going": args.keep_going,
        "rerun-incomplete": args.rerun_incomplete,
        "show-failed-logs": args.show_failed_logs,
        "printshellcmds": args.printshellcmds,
    }


def test_a_plain_dry_run_uses_the_workflow_profile(workflow_copy):
    out = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--quiet", "rules"], cwd=workflow_copy,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, failure_text(out)
    assert USING in out.stderr, out.stderr[-3000:]


def test_the_profile_sets_what_it_says(workflow_copy, monkeypatch):
    want = default_profile()
    assert settings(parsed(workflow_copy, monkeypatch, "-n")) == {
        **want, "rerun-triggers": sorted(want["rerun-triggers"])}
    off = settings(parsed(workflow_copy, monkeypatch, "-n", "--workflow-profile", "none"))
    assert off["rerun-incomplete"] is False and off["keep-going"] is False and off["resources"] == []
    assert "code" in off["rerun-triggers"]


@pytest.mark.parametrize("name", ["slurm", "kubernetes"])
def test_a_cluster_profile_replaces_the_default_only_as_the_workflow_profile(name, workflow_copy, monkeypatch):
    """``--workflow-profile profiles/slurm`` (as documented) takes the cluster's api cap; as a
    ``--profile`` the default profile, loaded after it, would cap the run at its own."""
    cluster = yaml.safe_load((REPO / "profiles" / name / "config.yaml").read_text())
    args = parsed(workflow_copy, monkeypatch, "-n", "--workflow-profile", f"profiles/{name}")
    assert args.executor == cluster["executor"]
    assert settings(args)["resources"] == cluster["resources"] != default_profile()["resources"]
    args = parsed(workflow_copy, monkeypatch, "-n", "--profile", f"profiles/{name}")
    assert settings(args)["resources"] == default_profile()["resources"]


def children(pid: int) -> dict[int, str]:
    """{pid: state} of the processes whose parent is ``pid``."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            state, ppid = stat.rsplit(")", 1)[1].split()[:2]
            if int(ppid) == pid:
                out[int(entry.name)] = state
    return out


def wait_for(condition, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_run_killed_after_a_jobs_last_write_reruns_with_no_extra_flag(workflow_copy):
    """kill -9 lands after the smoke job wrote its outputs and ended, before Snakemake recorded
    it: Snakemake is stopped (SIGSTOP) while the job's one model call is held, the call is let
    go, the job finishes, and then the run's process group is killed.  Without the workflow
    profile the next run stops with IncompleteFilesException; with it, the plain rerun reruns
    the job (replaying its call from the cache) and ends rc 0."""
    wf = workflow_copy
    asked, release = threading.Event(), threading.Event()

    def held(body: dict[str, Any]) -> str:
        asked.set()
        release.wait(120)
        return "Paris"

    with LoopbackServer(policy=held) as srv:
        (wf / "models.yaml").write_text(registry(loopback_endpoint(srv, api_key_env=None)))
        args = ["--configfile", str(loop_overlay(wf)), "--", TARGET]
        log = wf / "killed-run.log"
        with open(log, "w") as fh:
            proc = subprocess.Popen([sys.executable, "-m", "snakemake", "--cores", "2", *args], cwd=wf,
                                    stdout=fh, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            assert asked.wait(300), log.read_text()[-3000:]
            # the job runs: Snakemake has marked its outputs incomplete and can record nothing more
            assert any((wf / ".snakemake" / "incomplete").rglob("*")), log.read_text()[-3000:]
            os.kill(proc.pid, signal.SIGSTOP)
            release.set()
            # the job's process ends, unreaped by its stopped parent: its last write is done
            wait_for(lambda: children(proc.pid) and set(children(proc.pid).values()) == {"Z"}, 300,
                     f"the job to end: {children(proc.pid)}")
            assert (wf / TARGET).exists()
        finally:
            release.set()
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        assert USING in log.read_text()
        assert any((wf / ".snakemake" / "incomplete").rglob("*")), "the kill left the job marked incomplete"
        assert srv.stats.completions == 1

        unlock = run_snakemake(wf, "--unlock", *args)  # the killed run's locks
        assert unlock.returncode == 0, failure_text(unlock)

        without = run_snakemake(wf, "--workflow-profile", "none", *args)
        assert without.returncode != 0
        assert "IncompleteFilesException" in without.stdout + without.stderr, failure_text(without)
        assert f"Incomplete files:\n{TARGET}" in without.stdout + without.stderr

        rerun = run_snakemake(wf, *args)
        assert rerun.returncode == 0, failure_text(rerun)
        assert USING in rerun.stderr
        assert "Finished job" in rerun.stdout + rerun.stderr  # the job ran again...
        assert srv.stats.completions == 1  # ...replaying its call from the cache
        assert not any(p.is_file() for p in (wf / ".snakemake" / "incomplete").rglob("*"))
        again = run_snakemake(wf, *args)
        assert again.returncode == 0 and "Nothing to be done" in again.stdout + again.stderr, failure_text(again)
