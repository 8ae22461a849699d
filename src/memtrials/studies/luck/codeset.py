"""The source files the luck study's freeze hashes: every module of the study, every
``memtrials`` module they import (followed through re-exports and transitively), and the
model-layer files that build requests (*Lessons from Luck*, section 3.5: the frozen
package holds "the runner and serving code ... the registered analysis code").

Imports are read from the source (``ast``), not executed, so the list is cheap to compute
when Snakemake parses the workflow.  Modules that only run a rule (logging, the config
loader, the client's session plumbing) are left out by :data:`NOT_PROTOCOL`; what they
would change is either in the config slice or refused elsewhere.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

from memtrials.pipeline.codesets import module_file as _module_file

SRC = Path(__file__).resolve().parents[3]  # .../src
PACKAGE = SRC / "memtrials" / "studies" / "luck"
REPO = SRC.parent

# the model layer that turns the study's messages into requests: parameters, the schema
# text appended for endpoints without structured output, the cache key
REQUEST_FILES = ("memtrials/llm/client.py", "memtrials/llm/structured.py", "memtrials/llm/cache/keys.py")
# imported by the study, but not protocol: rule plumbing, config parsing (its values are
# frozen in the slice), the client's session/recording/limits (A's model layer beyond
# request building)
NOT_PROTOCOL = ("memtrials.cells", "memtrials.pipeline.rule_entry", "memtrials.config", "memtrials.llm")


# inside an excluded package, but protocol: the prompt loader reads the exact texts sent
PROTOCOL_INSIDE = ("memtrials.config.prompts",)


def _excluded(module: str) -> bool:
    if module in PROTOCOL_INSIDE:
        return False
    return any(module == m or module.startswith(m + ".") for m in NOT_PROTOCOL)


def _resolve(module: str, name: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """The module that defines ``name`` imported from ``module`` (through re-exports)."""
    sub = f"{module}.{name}"
    if _module_file(sub) is not None:
        return [sub]
    f = _module_file(module)
    if f is None or f.name != "__init__.py" or module in seen:
        return [module] if f is not None else []
    for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if any((a.asname or a.name) == name for a in node.names) and node.module.startswith("memtrials"):
                return _resolve(node.module, name, seen | {module})
        lazy = _lazy_submodule(node, name)
        if lazy is not None:  # a name the package loads on first use (PEP 562): its submodule
            return _resolve(f"{module}.{lazy}", name, seen | {module})
    return [module]


def _lazy_submodule(node: ast.AST, name: str) -> str | None:
    """The submodule a package's ``_WHERE = {name: submodule, ...}`` (a dict literal at module
    level, read by its ``__getattr__``; e.g. ``memtrials.stats``) gives for ``name``, or ``None``."""
    if not (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_WHERE" for t in node.targets)
            and isinstance(node.value, ast.Dict)):
        return None
    for key, value in zip(node.value.keys, node.value.values):
        if isinstance(key, ast.Constant) and key.value == name and isinstance(value, ast.Constant):
            return str(value.value)
    return None


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("memtrials"):
            for a in node.names:
                out.update(_resolve(node.module, a.name))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("memtrials"))
    return {m for m in out if not _excluded(m)}


@lru_cache(maxsize=1)
def protocol_files() -> tuple[str, ...]:
    """Repository-relative paths of every hashed source file, sorted."""
    todo = sorted(PACKAGE.glob("*.py"))
    files: set[Path] = set()
    while todo:
        f = todo.pop()
        if f in files:
            continue
        files.add(f)
        for m in _imports(f):
            mf = _module_file(m)
            if mf is not None and mf not in files:
                todo.append(mf)
    files.update(SRC / p for p in REQUEST_FILES)
    return tuple(sorted(p.relative_to(REPO).as_posix() for p in files))
