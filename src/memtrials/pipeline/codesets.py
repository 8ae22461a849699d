"""The package's own modules and the imports between them, read from the source with
``ast`` (nothing is executed, so it is cheap enough for Snakemake's parse).

Used for two things: the source files a rule depends on (:func:`source_files` of the
modules its entry point imports, transitively), and the guard against import cycles
(:func:`find_cycle`; ``tests/test_imports.py``).  Every ``import`` counts, including those
inside functions: a lazy import hides a cycle from the interpreter, not from the design.
Imports under ``if TYPE_CHECKING:`` do not count: they name a type for the checker and
never run.
"""

from __future__ import annotations

import ast
import graphlib
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Mapping

SRC = Path(__file__).resolve().parents[2]
"""The ``src`` folder that holds the ``memtrials`` package."""


def module_file(module: str) -> Path | None:
    """The file of a ``memtrials`` module or package (``None`` if there is none)."""
    base = SRC.joinpath(*module.split("."))
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def all_modules() -> list[str]:
    """Every module of the package, by dotted name, sorted."""
    out = []
    for path in (SRC / "memtrials").rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.append(".".join(parts))
    return sorted(out)


@lru_cache(maxsize=None)
def imports(module: str) -> frozenset[str]:
    """The ``memtrials`` modules that ``module`` imports anywhere in its file.

    ``from P import name`` counts as an import of ``P.name`` when that is a module, else of
    ``P``; relative imports are resolved against the module's package.
    """
    path = module_file(module)
    if path is None:
        raise ModuleNotFoundError(f"no module {module!r} under {SRC}")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _nodes(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if module_file(sub) is not None else base)
    return frozenset(m for m in found if m.split(".")[0] == "memtrials" and m != module
                     and module_file(m) is not None)


def _type_checking_only(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _nodes(tree: ast.AST) -> Iterable[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` (their ``else`` runs)."""
    todo = [tree]
    while todo:
        node = todo.pop()
        yield node
        if _type_checking_only(node):
            todo.extend(node.orelse)  # type: ignore[attr-defined]
            continue
        todo.extend(ast.iter_child_nodes(node))


def import_graph(modules: Iterable[str] | None = None) -> dict[str, frozenset[str]]:
    """Module -> the package modules it imports (every module of the package by default)."""
    return {m: imports(m) for m in (all_modules() if modules is None else modules)}


def find_cycle(graph: Mapping[str, Iterable[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as ``[a, b, ..., a]``, or ``None`` if it has none."""
    try:
        graphlib.TopologicalSorter({m: set(d) for m, d in graph.items()}).prepare()
    except graphlib.CycleError as err:
        return list(reversed(err.args[1]))
    return None


def closure(modules: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
    """``modules`` and every package module they import, transitively, sorted.

    A module in ``exclude`` (or under a package there) is neither listed nor followed.
    """
    skip = tuple(exclude)

    def excluded(m: str) -> bool:
        return any(m == e or m.startswith(e + ".") for e in skip)

    seen: set[str] = set()
    todo = [m for m in modules if not excluded(m)]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(d for d in imports(m) if d not in seen and not excluded(d))
    return sorted(seen)


def source_files(modules: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
    """Repository-relative paths (``src/memtrials/...``) of :func:`closure`'s modules."""
    root = SRC.parent
    return sorted(str(module_file(m).relative_to(root)) for m in closure(modules, exclude))  # type: ignore[union-attr]
