"""The job server's warm-up (:mod:`memtrials.pipeline.jobserver`): what it imports once before
it forks a child per job.  Every job imports :data:`BASE_MODULES`; the ``memtrials`` modules
the workflow's scripts import are read from the scripts (:func:`script_modules`, with ``ast``:
nothing is imported to find them), less those that would import a :data:`DENIED` package
(read from the sources at module level, transitively: :func:`reaches_denied`).
"""

from __future__ import annotations

import ast
import importlib
import os
import sys
from pathlib import Path

from memtrials.pipeline import jobclient

BASE_MODULES: tuple[str, ...] = (
    "numpy", "pandas", "pyarrow", "pyarrow.parquet", "jsonschema", "yaml", "snakemake.script",
    "snakemake.logging", "memtrials.pipeline.rule_entry", "memtrials.envs.process.forkserver", "memtrials.envs.scienceworld.env",
)
"""What every job imports (``run_rule`` and the files it writes)."""

DENIED: tuple[str, ...] = ("openai", "aiohttp", "appworld", "textworld", "alfworld", "scienceworld", "py4j",
                           "torch", "transformers", "matplotlib", "llama_cpp")
"""Packages the server does not import: SDKs and engines (a job imports them on first need)
and the plotting stack of the report jobs (one job a study, about 1 CPU-s).  SciPy and
scikit-learn are imported: the playbook study's jobs (about 40 in the default run) need them at
once, about 0.7 CPU-s each, and with the BLAS thread variables Snakemake sets for a one-thread
job (part of the server's key) they start no thread (``tests/test_jobserver.py``)."""


def _module_file(name: str) -> Path | None:
    """The source file of package module ``name`` (``memtrials.x.y``), or ``None``."""
    base = jobclient.PACKAGE.joinpath(*name.split(".")[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _top_imports(name: str, path: Path) -> list[str]:
    """The modules ``name`` imports when it loads (module level, not inside functions)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError):
        return []
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: list[str] = []
    todo = list(tree.body)
    while todo:
        node = todo.pop(0)
        if isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                todo.extend(node.body)
            todo.extend(node.orelse)
        elif isinstance(node, ast.Try):
            todo.extend(node.body + node.orelse + node.finalbody + [n for h in node.handlers for n in h.body])
        elif isinstance(node, ast.Import):
            out.extend(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            mod = node.module or ""
            if node.level:
                parts = package.split(".")
                mod = ".".join(parts[:len(parts) - node.level + 1] + ([mod] if mod else []))
            out.append(mod)
            out.extend(f"{mod}.{a.name}" for a in node.names)
    return out


def reaches_denied(name: str, seen: dict[str, bool] | None = None) -> bool:
    """Whether importing package module ``name`` would import a :data:`DENIED` package (read
    from the sources at module level, transitively; nothing is imported)."""
    seen = {} if seen is None else seen
    if name in seen:
        return seen[name]
    seen[name] = False  # an import cycle adds nothing
    parts = name.split(".")
    found = False
    for i in range(2, len(parts) + 1):  # the parent packages load first
        mod = ".".join(parts[:i])
        path = _module_file(mod)
        if path is None:
            continue
        for dep in _top_imports(mod, path):
            top = dep.split(".")[0]
            if top in DENIED or (top == "memtrials" and dep != mod and reaches_denied(dep, seen)):
                found = True
                break
        if found:
            break
    seen[name] = found
    return found


def script_modules(scripts: str | os.PathLike[str]) -> list[str]:
    """The ``memtrials`` modules the scripts import (and names imported from them that are
    modules), in order, less those that would import a :data:`DENIED` package."""
    out: list[str] = []
    seen: dict[str, bool] = {}
    for path in sorted(Path(scripts).glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            for name in names:
                if name.startswith("memtrials.") and name not in out and name != "memtrials.pipeline.jobclient" \
                        and _module_file(name) is not None and not reaches_denied(name, seen):
                    out.append(name)
    return out


def warm_up(scripts: str | os.PathLike[str]) -> list[str]:
    """Import :data:`BASE_MODULES` and :func:`script_modules`; return what failed (the job
    imports it again itself and fails or not as it would have without a server)."""
    failed = []
    for name in (*BASE_MODULES, *script_modules(scripts)):
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001
            failed.append(f"{name}: {exc!r}")
    return failed


def denied_loaded() -> list[str]:
    return sorted({m.split(".")[0] for m in sys.modules} & set(DENIED))
