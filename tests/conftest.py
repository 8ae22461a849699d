"""Shared fixtures: the loopback endpoint and configs that point at it."""

from __future__ import annotations

import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

from memtrials.testing import Faults, LoopbackServer, loopback_endpoint

REPO = Path(__file__).resolve().parents[1]


def dead_pid(start: int) -> int:
    """The first process id from ``start`` on that no live process holds (a killed owner's)."""
    from memtrials.machine import alive

    pid = start
    while alive(pid):
        pid += 1
    return pid


def base_config() -> dict[str, Any]:
    with open(REPO / "config" / "config.yaml") as fh:
        return yaml.safe_load(fh)


PER_CELL_SERVER = {"shared": False, "idle_s": 30}


def embedded_config(tmp_path: Path, servers: dict[str, Any] | None = PER_CELL_SERVER) -> dict[str, Any]:
    """The default config on the repository's models file (the embedded models), with its
    response cache under ``tmp_path``; ``servers`` overrides keys of the config's section
    (default: a per-cell server; ``None`` keeps the config's own)."""
    cfg = base_config()
    cfg["models_file"] = str(REPO / "config" / "models.yaml")
    cfg["cache"] = {"path": str(tmp_path / "cache" / "llm.sqlite"), "mode": "use", "backend": "sqlite"}
    if servers is not None:
        cfg["servers"] = {**cfg["servers"], **servers}
    return cfg


def run_snakemake(workdir: Path, *args: str, env: dict | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m snakemake --cores 2 ARGS`` in ``workdir``, output captured."""
    return subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", *args],
        cwd=workdir, capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})},
    )


RACE_BARRIER = """
        me.touch()
        deadline = time.monotonic() + 60
        while not other.exists() and time.monotonic() < deadline:  # a barrier: both send at once
            await asyncio.sleep(0.002)
"""
"""The lines a :func:`race_two_cells` script runs in its client before it sends (needs
``asyncio``, ``time`` and the paths ``me`` and ``other``)."""


def race_two_cells(caller: str, cfg: dict[str, Any], tmp: Path, tag: str) -> dict[str, Any]:
    """Run the script ``caller`` as cells ``a`` and ``b`` at once (two processes, as two jobs
    are), each with ``argv``: the config file, its records path, its own start mark and the
    other's (a barrier: both send at once); the JSON each prints last, by name."""
    import json

    (tmp / "cfg.json").write_text(json.dumps(cfg))
    (tmp / "caller.py").write_text(caller)
    for name in "ab":
        (tmp / f"{name}.{tag}").unlink(missing_ok=True)
    procs = {
        name: subprocess.Popen(
            [sys.executable, str(tmp / "caller.py"), str(tmp / "cfg.json"), str(tmp / f"{name}.parquet"),
             str(tmp / f"{name}.{tag}"), str(tmp / f"{other}.{tag}")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, other in (("a", "b"), ("b", "a"))
    }
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
        out[name] = json.loads(stdout.strip().splitlines()[-1])
    return out


def failure_text(proc: subprocess.CompletedProcess, tail: int = 3000) -> str:
    """What a failed run's assertion should show: every traceback and Snakemake ``Error in rule``
    block of its output (a failing job's traceback is often thousands of characters above the
    end, pushed out by the log lines of the jobs that kept running), then the output's tail."""
    text = (proc.stdout or "") + (proc.stderr or "")
    lines = text.splitlines()
    blocks: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("Traceback (most recent call last)") or line.startswith("Error in rule "):
            j = i + 1
            while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
                j += 1
            end = j + 1 if line.startswith("Traceback") else j  # the exception's own line
            blocks.append("\n".join(lines[i:end]))
            i = end
            continue
        i += 1
    found = "\n---\n".join(blocks[:6])
    return (f"{found}\n=== the output's last {tail} characters ===\n" if found else "") + text[-tail:]


WORKFLOW_ITEMS = ("Snakefile", "profiles", "workflow", "config", "envs")
"""What a workflow copy holds: ``profiles/`` too, since Snakemake loads ``profiles/default``
beside the Snakefile into every run (without it a copy runs without the workflow profile)."""


def copy_workflow(dest: Path) -> Path:
    """The workflow (:data:`WORKFLOW_ITEMS`; ``src`` and the shipped ``data`` linked) copied into
    the new folder ``dest``."""
    dest.mkdir(parents=True)
    for item in WORKFLOW_ITEMS:
        src = REPO / item
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dest / item)
    (dest / "src").symlink_to(REPO / "src")
    (dest / "data").symlink_to(REPO / "data")  # WebShop's catalog: rule env_webshop_data's inputs
    return dest


@pytest.fixture
def official_env_vars(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """``ALFWORLD_DATA`` and ``APPWORLD_ROOT`` set to folders that pass the parse-time check
    (``json_2.1.1`` and ``data/tasks`` exist; empty: a config test reads no game or task)."""
    alf, app = tmp_path / "alfworld_data", tmp_path / "appworld_root"
    (alf / "json_2.1.1").mkdir(parents=True)
    (app / "data" / "tasks").mkdir(parents=True)
    monkeypatch.setenv("ALFWORLD_DATA", str(alf))
    monkeypatch.setenv("APPWORLD_ROOT", str(app))
    return alf, app


@pytest.fixture
def workflow_copy(tmp_path: Path) -> Path:
    """The workflow in a temporary directory (results and logs land there)."""
    return copy_workflow(tmp_path / "wf")


@pytest.fixture
def loopback() -> Callable[..., LoopbackServer]:
    """Factory: ``loopback(policy=..., faults=Faults(...))`` -> a started server, stopped after the test."""
    servers: list[LoopbackServer] = []

    def make(policy: Any = "first_admissible", faults: Faults | None = None, **kw: Any) -> LoopbackServer:
        srv = LoopbackServer(policy=policy, faults=faults, **kw).start()
        servers.append(srv)
        return srv

    yield make
    for srv in servers:
        srv.stop()


@pytest.fixture
def make_config(tmp_path: Path) -> Callable[..., dict[str, Any]]:
    """Factory: a pipeline config whose panel is one loopback endpoint named ``loop``."""

    def make(srv: LoopbackServer, *, name: str = "loop", request: dict[str, Any] | None = None,
             budget: dict[str, Any] | None = None, cache_dir: Path | None = None, **endpoint_kw: Any) -> dict[str, Any]:
        cfg = copy.deepcopy(base_config())
        models_path = tmp_path / f"models-{name}.yaml"
        models_path.write_text(yaml.safe_dump({"endpoints": {name: loopback_endpoint(srv, **endpoint_kw)}}))
        cfg["models_file"] = str(models_path)
        cfg["panel"] = [name]
        cfg["roles"] = {role: name for role in (cfg.get("roles") or {})}
        cfg["cache"] = {"path": str((cache_dir or tmp_path / "results" / "cache") / "llm.sqlite"), "mode": "use", "backend": "sqlite"}
        cfg["request"] = {"timeout_s": 5.0, "max_retries": 8, "backoff_base_s": 0.01, "backoff_max_s": 0.2,
                          **(request or {})}
        if budget is not None:
            cfg["budget"] = budget
        return cfg

    return make


APPWORLD_BUILD = (
    "import json, sys; from memtrials.envs.appworld.data import build; "
    "from memtrials.envs.appworld.manifest import load_manifest; "
    "fams = json.loads(sys.argv[2]); "
    "build(sys.argv[1], seed=0, families=fams, max_variants=int(sys.argv[3]) or None, workers=1, "
    "verified=load_manifest(sys.argv[4]))"
)


@pytest.fixture(scope="session")
def appworld_root(tmp_path_factory) -> Callable[..., Path]:
    """Factory: ``appworld_root(families, max_variants)`` -> an AppWorld data root holding those
    authored tasks, built once per session in a subprocess (AppWorld fixes its root per
    process) against the checked-in verification manifest, so AppWorld's evaluator re-checks
    only tasks it does not cover (tests/envs/test_appworld.py checks the manifest against the
    sources and a fresh verification).  Treat the root as read-only."""
    built: dict[tuple, Path] = {}

    def make(families: tuple[str, ...] | list[str] | None = None, max_variants: int | None = None) -> Path:
        key = (tuple(families) if families is not None else None, max_variants)
        if key not in built:
            import json

            root = tmp_path_factory.mktemp("appworld-root") / "root"
            proc = subprocess.run(
                [sys.executable, "-c", APPWORLD_BUILD, str(root), json.dumps(key[0]), str(max_variants or 0),
                 str(REPO / "src" / "memtrials" / "envs" / "appworld" / "verification.json")],
                capture_output=True, text=True, timeout=1800,
                env={**os.environ, "PYTHONPATH": str(REPO / "src")})
            assert proc.returncode == 0, proc.stderr[-3000:]
            built[key] = root
        return built[key]

    return make


RUN_HOLDER = ("import sys; from pathlib import Path; from memtrials.machine import hold_run; "
              "hold_run(Path(sys.argv[1])); print('held', flush=True); sys.stdin.read()")
"""A process that holds a workflow run's lease on the shared servers of the folder ``argv[1]``
(``memtrials.machine.hold_run``) until its stdin closes: another run on the machine."""
