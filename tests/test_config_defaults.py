"""One source of defaults: config/config.yaml, whose schema marks every key required and
documents the same default; the code reads keys without a second default."""

from __future__ import annotations

import ast
import copy
from pathlib import Path

import pytest
import yaml

from memtrials.config import ConfigError, check_config, load_schema, merge
from tests.conftest import REPO, base_config

SECTIONS = ("cache", "smoke", "history", "envs", "playbook", "calibrator", "antipersist", "servers", "memory",
            "scorecard")  # luck: tests/luck (its own section)


def _walk(schema: dict, value, path: str):
    """Yield (path, schema node, config value) for every key of the config section."""
    yield path, schema, value
    if isinstance(value, dict) and "properties" in schema:
        for k, v in value.items():
            yield from _walk(schema["properties"][k], v, f"{path}.{k}")


@pytest.mark.parametrize("section", SECTIONS)
def test_every_key_required_and_default_documented(section):
    schema = load_schema("config.schema.json")
    assert section in schema["required"]
    cfg = base_config()
    for path, node, value in _walk(schema["properties"][section], cfg[section], section):
        if isinstance(value, dict) and "properties" in node:
            assert set(node["required"]) >= set(value), f"{path}: keys not required: {set(value) - set(node['required'])}"
        else:
            assert "default" in node and node["default"] == value, f"{path}: schema default differs from config.yaml"


@pytest.mark.parametrize("path", ["history.in_flight", "history.continuation.min_source_steps",
                                  "history.probe.enabled", "envs.check.per_split", "envs.seed", "smoke.max_tokens",
                                  "envs.scienceworld.join_admissible", "history.tasks"])
def test_missing_key_is_named(path):
    cfg = copy.deepcopy(base_config())
    *parents, leaf = path.split(".")
    node = cfg
    for k in parents:
        node = node[k]
    del node[leaf]
    where = ".".join(parents)
    with pytest.raises(ConfigError, match=rf"key {where}: '{leaf}' is a required property"):
        check_config(cfg)


@pytest.mark.parametrize("preset", sorted(p.name for p in (REPO / "config/presets").glob("*.yaml")
                                          if not p.name.endswith(".models.yaml")))
def test_presets_merged_onto_the_defaults_validate(preset):
    overlay = yaml.safe_load((REPO / "config/presets" / preset).read_text())
    check_config(merge(base_config(), overlay), f"config/presets/{preset}")


MODULES = ["src/memtrials/studies/history/workflow.py", "src/memtrials/studies/history/entry.py",
           "src/memtrials/studies/history/design.py", "src/memtrials/studies/history/report.py",
           "src/memtrials/envs/build.py",
           "workflow/rules/envs.smk", "workflow/rules/smoke.smk", "workflow/rules/history.smk"]


@pytest.mark.parametrize("module", MODULES)
def test_no_second_default_in_code(module):
    """No ``mapping.get(key, default)`` on the config: a missing key is a schema error."""
    text = (REPO / module).read_text()
    if module.endswith(".smk"):  # Snakemake syntax: check only the Python lines we can parse
        calls = [ln for ln in text.splitlines() if ".get(" in ln]
        assert not calls, f"{module}: {calls}"
        return
    def constant(node: ast.AST) -> bool:  # a module constant (UPPER_CASE), not the config
        return isinstance(node, ast.Name) and node.id.isupper()

    bad = [ast.unparse(n) for n in ast.walk(ast.parse(text))
           if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get"
           and len(n.args) == 2 and not constant(n.func.value)]
    assert not bad, f"{module}: second defaults {bad}"
