"""Layers below the studies never name a study (the house issue), read statically from the source.

A module outside ``memtrials.studies`` (and the command line above them, ``memtrials.__main__``)
holds no string literal that is a study's name (``"history"``), names a study's prompt folder
(``config/prompts/<study>``) or names a study's config key (``"history.shuffle"``): what a
lower layer needs of a study (a folder, a key, a label) is handed down by the study.  The
studies are the packages under ``memtrials/studies/`` (the calibrator's included), read from
the tree.  Docstrings (and comments) may cite a paper, a study's docs or its keys; a literal
used for something else that only happens to spell a study's name is allowed below, with its
reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from memtrials.pipeline import codesets

PACKAGE = Path(codesets.module_file("memtrials")).parent
ABOVE = ("memtrials.studies", "memtrials.__main__")

STATE_LOG = ("a memory's own update log, the 'history' key of its saved state (memory.json): "
             "renaming it would change written files, and it names no study")
ALLOWED: dict[tuple[str, str], str] = {
    ("memtrials.memory.abstraction", "history"): STATE_LOG,
    ("memtrials.memory.ace", "history"): STATE_LOG,
    ("memtrials.memory.autorefine", "history"): STATE_LOG,
    ("memtrials.memory.cheatsheet", "history"): STATE_LOG,
    ("memtrials.memory.expel", "history"): STATE_LOG,
    ("memtrials.memory.registry", "playbook"): ("the method playbook() of a memory whose lessons are measured "
                                                "(ACE's term for its lesson set), listed among the methods a "
                                                "class must have; it names no study"),
}
"""(module, literal) -> why the literal is not a lower layer naming a study."""


def studies() -> tuple[str, ...]:
    """Every study package's name: the folders under ``memtrials/studies/`` with an ``__init__.py``."""
    root = PACKAGE / "studies"
    return tuple(sorted(p.parent.name for p in root.rglob("__init__.py") if p.parent != root))


def _pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    alt = "|".join(map(re.escape, names))
    # a prompt folder (config/prompts/<study>) or a config key (<study>.<key>, not a dotted module path)
    return re.compile(rf"prompts/({alt})\b|(?<![\w./-])({alt})\.[a-z_]")


def _docstrings(tree: ast.Module) -> set[int]:
    """Bare string statements: module, class and function docstrings and attribute docstrings."""
    return {id(n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)}


def naming(tree: ast.Module, module: str, names: tuple[str, ...]) -> list[str]:
    """The literals of ``tree`` that name a study, as ``module:line: 'literal'`` (allowed ones left out)."""
    docs, pattern = _docstrings(tree), _pattern(names)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
            continue
        text = node.value
        if (text in names or pattern.search(text)) and (module, text) not in ALLOWED:
            found.append(f"{module}:{node.lineno}: {text[:80]!r}")
    return found


def below_the_studies() -> dict[str, Path]:
    return {m: codesets.module_file(m) for m in codesets.all_modules()
            if not any(m == a or m.startswith(a + ".") for a in ABOVE)}


def test_the_studies_are_read_from_the_tree():
    assert {"history", "calibrator", "luck", "playbook", "antipersist"} <= set(studies())
    modules = below_the_studies()
    assert "memtrials.agent.prompts" in modules and "memtrials.memory.antipersist" in modules
    assert not any(m.startswith("memtrials.studies") for m in modules)


def test_no_layer_below_the_studies_names_a_study():
    names = studies()
    bad = [b for m, p in sorted(below_the_studies().items())
           for b in naming(ast.parse(p.read_text(encoding="utf-8")), m, names)]
    assert not bad, "layers below the studies name a study (hand it down from the study instead):\n" + "\n".join(bad)


def test_every_allowed_literal_is_still_there():
    """An allow-list entry whose literal is gone is removed, so the list stays the exceptions there are."""
    modules = below_the_studies()
    stale = []
    for module, literal in ALLOWED:
        tree = ast.parse(modules[module].read_text(encoding="utf-8"))
        if not any(isinstance(n, ast.Constant) and n.value == literal for n in ast.walk(tree)):
            stale.append((module, literal))
    assert not stale, f"allow-list entries with nothing left to allow: {stale}"


def test_the_check_finds_planted_names():
    names = ("history", "luck")
    tree = ast.parse('"""Docstring: config/prompts/history/ and history.shuffle are cited."""\n'
                     'A = "history"\nB = "config/prompts/luck"\nC = f"set luck.prompts_dir to {A}"\n'
                     'D = "memtrials.studies.history.entry"\nE = "the agent history"\n'
                     'def f():\n    """history.shuffle"""\n    return "config/prompts/actor"\n')
    assert [b.split(": ", 1)[0] for b in naming(tree, "m", names)] == ["m:2", "m:3", "m:4"]
