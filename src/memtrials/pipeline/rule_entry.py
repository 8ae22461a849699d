"""What every rule's script shares when it enters Python: logging to the console and the
rule's log, a clean stop (a precise message, no deep traceback) on the errors a user can
fix, and the rule's *spec* written next to its outputs once it succeeds.

:func:`run_rule` is the one entry: ``run_rule(snakemake, main)``.  The spec
(``<output dir>/<first output's name less its suffix>.spec.json``, canonical JSON) says what
produced the outputs: the rule, its wildcards, its params (the config slice that decides
the outputs; endpoint params never hold a key, and anything that looks like one is
redacted all the same), the digests of its prompt files (an input named ``prompts``),
its input and output paths, the package version and the git revision of the code that ran.

Each successful job also logs its own cost last (:func:`job_cost`, one ``job cost:`` line):
wall seconds since its Python process started, the CPU seconds of that process and of the
child processes it waited for (the environments' processes), so a fully cached rerun shows
each job's fixed cost (``benchmarks/bench_cached_rerun.py`` reads these lines).

(Named for what it is, the entry of a Snakemake rule into the package; it was
``memtrials/cells.py``, a word that also meant a study's design cell and a history rule's
entry points.)
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import resource
import subprocess
import sys
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, TypeVar

import memtrials
from memtrials.config import ConfigError
from memtrials.io import atomic_write_json
from memtrials.llm.results import LLMError
from memtrials.config.prompts import PromptFiles

T = TypeVar("T")
SPEC_SUFFIX = ".spec.json"
REDACTED = "<redacted>"
_SECRET_KEY = re.compile(r"(api[_-]?key|secret|token|authorization|password)$", re.IGNORECASE)
_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)$")


def setup_logging(log_path: str | os.PathLike[str] | None, level: int = logging.INFO) -> None:
    """Log to stderr (the console) and, if given, to the rule's log file."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w", encoding="utf-8"))
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        handlers=handlers, force=True)
    for noisy in ("httpx", "httpx2", "openai", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def run_cell(main: Callable[[], Awaitable[T]] | Callable[[], T], log_path: Any = None) -> T:
    """Run a rule's main (sync or async); on a user-fixable error, log it and exit 1."""
    setup_logging(log_path)
    log = logging.getLogger("memtrials.rule")
    try:
        result = main()
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        return result  # type: ignore[return-value]
    except (ConfigError, LLMError) as exc:
        log.error("%s", exc)
        sys.exit(1)
    except Exception:
        _log_file_traceback(log)
        raise  # Python (or the job server's child) prints it on stderr


def _log_file_traceback(log: logging.Logger) -> None:
    """Write the exception being handled, with its traceback, to the rule's log file only (the
    console gets it from the uncaught exception): a failed job's log then says why it failed."""
    record = log.makeRecord(log.name, logging.ERROR, __file__, 0, "the job failed with an unexpected error",
                            (), sys.exc_info())
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)


def run_rule(smk: Any, main: Callable[[], Awaitable[T]] | Callable[[], T]) -> T:
    """Run a rule's ``main`` (sync or async) with logging to ``smk.log[0]``; on success write
    the rule's spec (:func:`write_spec`); on a user-fixable error log it and exit 1."""
    from memtrials.envs.process.forkserver import configure

    configure(getattr(smk, "config", None))  # envs.fork_server: environments forked from a warm process
    if getattr(smk, "config", None):  # envs.scienceworld.join_admissible, for this process and its children
        from memtrials.envs.scienceworld.env import configure as configure_scienceworld

        configure_scienceworld(smk.config)
    result = run_cell(main, smk.log[0] if len(smk.log) else None)
    path = write_spec(smk)
    log = logging.getLogger("memtrials.rule")
    log.info("spec: %s", path)
    from memtrials.pipeline.jobclient import SERVED

    if SERVED is not None:
        log.info("job server: forked by pid %s for job process %s (%.2f CPU-s there before the hand-over)",
                 SERVED["server_pid"], SERVED["client_pid"], SERVED["client_cpu_s"])
    log.info("%s", format_cost(job_cost()))
    return result


COST_LINE = re.compile(r"job cost: (?P<wall>[0-9.]+|-) s wall, (?P<cpu>[0-9.]+) CPU-s in the job's "
                       r"process, (?P<children>[0-9.]+) CPU-s in its children")


def job_cost() -> dict[str, float | None]:
    """This process's cost so far: ``wall_s`` since it started (``None`` where ``/proc`` is
    missing), ``cpu_s`` (user + system) and ``children_cpu_s`` (the children it waited for, and
    the environments forked for it by a fork server, which report their CPU when they close, and
    the shared ScienceWorld JVMs while lent to it).

    In a job forked by the job server (:mod:`memtrials.pipeline.jobserver`) the job is two processes:
    the one Snakemake started (its interpreter's start, Snakemake's preamble, the hand-over)
    and the forked child; ``cpu_s`` is the first's CPU up to the hand-over plus the child's,
    ``wall_s`` counts from the first's start, as without a server."""
    from memtrials.envs.process.forkserver import FORKED_CPU_S  # environments forked for this job count as its children
    from memtrials.envs.scienceworld.jvm import LENT_CPU_S  # so do shared JVMs while lent to it

    from memtrials.pipeline.jobclient import SERVED  # a job forked by the job server: count its client too

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall, cpu = _process_age(), own.ru_utime + own.ru_stime
    if SERVED is not None:  # the fork's rusage starts at zero and its age at the hand-over
        cpu += float(SERVED["client_cpu_s"])
        started = SERVED.get("started_at")
        wall = None if started is None else max(0.0, time.time() - float(started))
    return {"wall_s": wall, "cpu_s": cpu,
            "children_cpu_s": kids.ru_utime + kids.ru_stime + FORKED_CPU_S[0] + LENT_CPU_S[0]}


def format_cost(cost: Mapping[str, float | None]) -> str:
    """The ``job cost:`` log line of :func:`job_cost` (parsed back by :data:`COST_LINE`)."""
    wall = "-" if cost["wall_s"] is None else f"{cost['wall_s']:.2f}"
    return (f"job cost: {wall} s wall, {cost['cpu_s']:.2f} CPU-s in the job's process, "
            f"{cost['children_cpu_s']:.2f} CPU-s in its children")


def _process_age() -> float | None:
    """Seconds since this process started (Linux ``/proc``), or ``None``."""
    from memtrials.pipeline.jobclient import process_start

    started = process_start()
    return None if started is None else max(0.0, time.time() - started)


def spec_path(first_output: str | os.PathLike[str]) -> Path:
    """``results/a/raw.parquet`` -> ``results/a/raw.spec.json`` (a folder output: beside it)."""
    p = Path(first_output)
    return p.with_name((p.stem if p.suffix else p.name) + SPEC_SUFFIX)


def write_spec(smk: Any) -> Path:
    """Write :func:`rule_spec` of ``smk`` beside its first output, atomically."""
    return atomic_write_json(spec_path(smk.output[0]), rule_spec(smk))


def rule_spec(smk: Any) -> dict[str, Any]:
    """What produced a rule's outputs (see the module docstring); JSON-ready, keys redacted."""
    # every prompt input: the study's own (``prompts``) and the shared folders' (``actor_prompts``, ...)
    prompts: list[str] = []
    for name, value in smk.input.items():
        if name == "prompts" or name.endswith("_prompts"):
            prompts += [value] if isinstance(value, str) else list(value or [])
    spec = {
        "rule": smk.rule,
        "wildcards": {k: str(v) for k, v in smk.wildcards.items()},
        "params": {k: _plain(v) for k, v in smk.params.items()},
        "prompts": prompt_digests(prompts),
        "inputs": _paths(smk.input),
        "outputs": _paths(smk.output),
        "memtrials_version": memtrials.__version__,
        "git": git_revision(),
    }
    return redact(spec)


def prompt_digests(paths: list[str]) -> dict[str, Any] | None:
    """Folder, per-file SHA-256 and version of prompt files (as :class:`PromptFiles` computes them)."""
    if not paths:
        return None
    folders = sorted({str(Path(p).parent) for p in paths})
    out = {}
    for folder in folders:
        names = sorted(Path(p).name for p in paths if str(Path(p).parent) == folder)
        loaded = PromptFiles.load(folder, names, what="rule")
        out[folder] = {"digests": loaded.digests(), "version": loaded.version()}
    return out


@lru_cache(maxsize=1)
def git_revision() -> dict[str, Any]:
    """``{"revision": <HEAD>, "dirty": bool}`` of the checkout the package runs from, or
    ``{"revision": "unknown", "dirty": None}`` outside one (or without git)."""
    repo = Path(memtrials.__file__).resolve().parents[2]
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=20, check=True).stdout.strip()
        status = subprocess.run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=60, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return {"revision": "unknown", "dirty": None}
    return {"revision": head, "dirty": bool(status.strip())}


def redact(obj: Any, secrets: tuple[str, ...] | None = None) -> Any:
    """``obj`` with the value of any key named like a secret (``api_key``, ``token``, ...;
    not ``api_key_env``, which names a variable) and any string equal to a secret-looking
    environment variable's value replaced by ``"<redacted>"``."""
    if secrets is None:
        secrets = tuple(v for k, v in os.environ.items() if _SECRET_ENV.search(k.upper()) and len(v) >= 8)
    if isinstance(obj, Mapping):
        return {k: REDACTED if _SECRET_KEY.search(str(k)) and obj[k] else redact(v, secrets)
                for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v, secrets) for v in obj]
    if isinstance(obj, str) and any(s in obj for s in secrets):
        return REDACTED
    return obj


def _paths(files: Any) -> list[str]:
    """A rule's input or output files as a flat list of strings."""
    out: list[str] = []
    for f in files:
        out.extend(_paths(f) if isinstance(f, (list, tuple)) else [str(f)])
    return out


def _plain(value: Any) -> Any:
    """A param as JSON data (Snakemake's lists and mappings become lists and dicts)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)
