"""Code sets (the import graph): the package's own modules and the imports between them,
read from the source with ``ast`` (nothing is executed, so it is cheap enough for
Snakemake's parse).

Used for three things: the source files a rule depends on (:func:`source_files` of the
modules its entry point imports, transitively), the guard against import cycles
(:func:`find_cycle`; ``tests/test_imports.py``), and code sets that follow each imported
name to the module that defines it (:func:`defining_closure`; the luck study's freeze).

In :func:`imports` every ``import`` counts, including those inside functions: a lazy import
hides a cycle from the interpreter, not from the design.  Imports under ``if TYPE_CHECKING:``
do not count there: they name a type for the checker and never run.
"""

from __future__ import annotations

import ast
import graphlib
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Mapping

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


def repo_path(module: str) -> str:
    """The repository-relative path (``src/memtrials/...``) of a module's file."""
    return str(module_file(module).relative_to(SRC.parent))  # type: ignore[union-attr]


def source_files(modules: Iterable[str], exclude: Iterable[str] = ()) -> list[str]:
    """Repository-relative paths (``src/memtrials/...``) of :func:`closure`'s modules."""
    return sorted(repo_path(m) for m in closure(modules, exclude))


# --- imports resolved to the module that defines each name ------------------------------------
# A second reading of the same graph, finer than :func:`imports`: ``from P import name`` counts
# as an import of the module that defines ``name``, followed through the re-exports of a
# package's ``__init__`` (so importing one function of ``memtrials.stats`` reaches its module,
# not every module the package re-exports).  A code set that is hashed (the luck study's
# freeze, :mod:`memtrials.studies.luck.codeset`) reads it.

def defining_modules(module: str, name: str, seen: frozenset[str] = frozenset()) -> list[str]:
    """The module that defines ``name`` in ``from module import name``: the submodule
    ``module.name`` if there is one; else, in a package, the module its ``__init__``
    re-exports ``name`` from (absolute imports, followed transitively) or loads it from on
    first use (a module-level ``_WHERE = {name: submodule}`` read by its ``__getattr__``,
    PEP 562); else ``module`` itself (no module when ``module`` has no file)."""
    sub = f"{module}.{name}"
    if module_file(sub) is not None:
        return [sub]
    f = module_file(module)
    if f is None or f.name != "__init__.py" or module in seen:
        return [module] if f is not None else []
    for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if any((a.asname or a.name) == name for a in node.names) and node.module.startswith("memtrials"):
                return defining_modules(node.module, name, seen | {module})
        lazy = _lazy_submodule(node, name)
        if lazy is not None:
            return defining_modules(f"{module}.{lazy}", name, seen | {module})
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


def defining_imports(path: Path) -> set[str]:
    """The ``memtrials`` modules the file at ``path`` imports, each ``from P import name``
    resolved by :func:`defining_modules`.  Every absolute import statement of the file counts,
    those under ``if TYPE_CHECKING:`` too; relative imports are not read."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("memtrials"):
            for a in node.names:
                out.update(defining_modules(node.module, a.name))
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("memtrials"))
    return out


def defining_closure(files: Iterable[Path], follow: Callable[[str], bool]) -> set[Path]:
    """``files`` and the files of every module their :func:`defining_imports` reach,
    transitively, through the modules ``follow`` accepts (the others are neither listed nor read)."""
    todo = list(files)
    seen: set[Path] = set()
    while todo:
        f = todo.pop()
        if f in seen:
            continue
        seen.add(f)
        for m in defining_imports(f):
            if not follow(m):
                continue
            mf = module_file(m)
            if mf is not None and mf not in seen:
                todo.append(mf)
    return seen
