"""Every rule script's call reaches a function that takes exactly what the script passes.

A script (``workflow/scripts/*.py``) is a few explicit lines: it hands the job over, then calls
one function of the package with keyword arguments read from ``snakemake``. A keyword renamed on
one side only would fail when the rule first runs, after earlier jobs spent their calls; here
each script's calls to package functions are read from its source (nothing is run) and bound to
the functions' signatures.
"""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SCRIPTS = sorted((REPO / "workflow" / "scripts").glob("*.py"))
PLUMBING = {"hand_over", "run_rule", "refusing", "write_parquet"}  # what every script calls around the work


def _imported(tree: ast.Module) -> dict[str, object]:
    """Local name -> the object a ``from memtrials... import`` binds."""
    out: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("memtrials"):
            module = importlib.import_module(node.module)
            for a in node.names:
                value = getattr(module, a.name, None)
                if value is None:
                    value = importlib.import_module(f"{node.module}.{a.name}")
                out[a.asname or a.name] = value
    return out


def _calls(tree: ast.Module, names: dict[str, object]) -> list[tuple[str, object, ast.Call]]:
    """Calls of an imported function (``f(...)``) or of a module's function (``entry.f(...)``)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        if isinstance(f, ast.Name) and f.id in names and f.id not in PLUMBING and callable(names[f.id]):
            found.append((f.id, names[f.id], node))
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and inspect.ismodule(names.get(f.value.id)):
            target = getattr(names[f.value.id], f.attr, None)
            assert target is not None, f"{f.value.id}.{f.attr} does not exist"
            found.append((f"{f.value.id}.{f.attr}", target, node))
    return found


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_the_script_passes_what_its_function_takes(script):
    tree = ast.parse(script.read_text(encoding="utf-8"))
    names = _imported(tree)
    calls = _calls(tree, names)
    if script.name == "calibrator_sft.py":  # runs the training entry point in its own interpreter,
        assert [label for label, _, _ in calls] == ["sft_rule.sft_recipe"]  # after resolving its recipe here
    assert calls, f"{script.name} calls no package function"
    for label, fn, call in calls:
        signature = inspect.signature(fn)
        args = [None] * len(call.args)
        kwargs = {k.arg: None for k in call.keywords if k.arg is not None}
        spread = any(k.arg is None for k in call.keywords)  # ``**mapping``: its keys are the params'
        try:
            (signature.bind_partial if spread else signature.bind)(*args, **kwargs)
        except TypeError as exc:
            pytest.fail(f"{script.name}: {label}{signature} does not take what the script passes "
                        f"({len(args)} positional, keywords {sorted(kwargs)}): {exc}")


def test_a_renamed_keyword_is_found(tmp_path):
    tree = ast.parse("from memtrials.studies.playbook import entry\nentry.growth({}, modle='x')\n")
    [(label, fn, call)] = _calls(tree, _imported(tree))
    with pytest.raises(TypeError):
        inspect.signature(fn).bind(None, **{k.arg: None for k in call.keywords})
