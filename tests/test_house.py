"""The house rules of the package, read statically from the source (nothing is run):

- no module over 400 lines;
- no module named after a standard-library module that Python does not load before any
  user code (``llm/tokenize.py`` once broke ``inspect`` for anyone running Python inside
  its folder);
- no module reads another module's private names (``from m import _x``, ``m._x``, or an
  object's ``obj._x`` where ``_x`` is private to a class of another module);
- no public function or method takes ``client``, ``memory``, ``prompts`` or ``env`` typed
  ``Any``: those are the seams between layers, and their types say what crosses them;
- no committed file points at ``../shared/`` (a user's clone has no such folder);
- every runtime dependency the package declares is imported by it.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from memtrials.pipeline import codesets

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "memtrials"
MAX_LINES = 400
SEAMS = ("client", "memory", "prompts", "env")
# modules the interpreter has loaded before any user code runs, so a package module of
# the same name cannot shadow them (``io``: sys.stdout is an io object)
LOADED_AT_START = {"io"}


def _modules() -> dict[str, Path]:
    return {m: codesets.module_file(m) for m in codesets.all_modules()}


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_no_module_is_over_400_lines():
    long = {m: n for m, p in _modules().items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_no_module_shadows_the_standard_library():
    bad = sorted(m for m in _modules() if (leaf := m.rsplit(".", 1)[-1]) in sys.stdlib_module_names
                 and leaf not in LOADED_AT_START and not leaf.startswith("__"))
    assert not bad, f"named after a standard-library module (rename them): {bad}"


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _class_privates(tree: ast.Module) -> set[str]:
    """Private names a module's classes define: methods, class attributes, ``self._x = ...``."""
    out: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(node.name):
                out.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _private(node.attr):
                out.add(node.attr)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                out.update(t.id for t in targets if isinstance(t, ast.Name) and _private(t.id))
    return out


def private_reads() -> list[str]:
    modules = _modules()
    trees = {m: _tree(p) for m, p in modules.items()}
    owners: dict[str, set[str]] = {}
    for m, tree in trees.items():
        for name in _class_privates(tree):
            owners.setdefault(name, set()).add(m)
    bad: list[str] = []
    for m, tree in trees.items():
        mine = _class_privates(tree)
        aliases: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memtrials"):
                for a in node.names:
                    if _private(a.name):
                        bad.append(f"{m}: from {node.module} import {a.name}")
                    if f"{node.module}.{a.name}" in modules:
                        aliases.add(a.asname or a.name)
            elif isinstance(node, ast.Import):
                aliases.update(a.asname for a in node.names if a.name.startswith("memtrials") and a.asname)
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and _private(node.attr)):
                continue
            value = node.value
            if isinstance(value, ast.Name) and value.id in ("self", "cls"):
                continue
            if isinstance(value, ast.Name) and value.id in aliases:
                bad.append(f"{m}: {value.id}.{node.attr} (line {node.lineno})")
            elif node.attr not in mine and owners.get(node.attr, set()) - {m}:
                bad.append(f"{m}: .{node.attr} (line {node.lineno}), private to "
                           f"{', '.join(sorted(owners[node.attr] - {m}))}")
    return bad


def test_no_module_reads_another_modules_private_names():
    bad = private_reads()
    assert not bad, "private names read across modules:\n" + "\n".join(bad)


def test_the_private_name_check_finds_a_planted_read(tmp_path, monkeypatch):
    planted = PACKAGE / "io.py"
    text = planted.read_text(encoding="utf-8")
    tree = ast.parse(text + "\n\ndef _planted(client):\n    return client._send\n")
    monkeypatch.setattr(sys.modules[__name__], "_tree",
                        lambda p, _orig=_tree: tree if p == planted else _orig(p))
    assert any("memtrials.io: ._send" in b for b in private_reads())


def _any(annotation: ast.expr | None) -> bool:
    """``Any``, ``typing.Any``, ``Any | None``, ``Optional[Any]`` (or the same as a string)."""
    if annotation is None:
        return False
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        annotation = ast.parse(annotation.value, mode="eval").body
    names = {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(annotation)
             if isinstance(n, (ast.Name, ast.Attribute))}
    return "Any" in names and not names - {"Any", "None", "Optional", "typing"}


def untyped_seams(tree: ast.Module, module: str) -> list[str]:
    bad = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or _private(node.name):
            continue
        args = node.args
        for a in (*args.posonlyargs, *args.args, *args.kwonlyargs):
            if a.arg in SEAMS and _any(a.annotation):
                bad.append(f"{module}.{node.name}({a.arg}: Any) line {node.lineno}")
    return bad


def test_the_seams_are_typed():
    bad = [b for m, p in _modules().items() for b in untyped_seams(_tree(p), m)]
    assert not bad, "public functions with a seam typed Any:\n" + "\n".join(bad)


def test_the_seam_check_finds_a_planted_any():
    tree = ast.parse("from typing import Any\ndef run(client: Any, *, memory: 'Any | None' = None,\n"
                     "        env: int = 0) -> None: ...\ndef _inner(client: Any): ...\n")
    assert untyped_seams(tree, "m") == ["m.run(client: Any) line 2", "m.run(memory: Any) line 2"]


def test_no_committed_file_points_at_the_workplace():
    files = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    bad = []
    for f in files:
        path = REPO / f
        if f == "tests/test_house.py" or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        if "../shared/" in text:
            bad.append(f)
    assert not bad, f"files pointing at ../shared/ (not in a user's clone): {bad}"


IMPORT_NAMES = {"scikit-learn": "sklearn", "pyyaml": "yaml"}


@pytest.mark.parametrize("dist", tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])
def test_every_declared_dependency_is_imported(dist):
    name = IMPORT_NAMES.get(dist, dist.replace("-", "_"))
    imported = set()
    for p in _modules().values():
        for node in ast.walk(_tree(p)):
            if isinstance(node, ast.Import):
                imported.update(a.name.split(".")[0] for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    assert name in imported, f"pyproject.toml declares {dist}, which the package never imports"
