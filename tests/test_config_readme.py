"""config/README.md documents every key of config/config.yaml and every preset, as the
Snakemake catalog's workflows do: a key (or preset) added later without a line there fails."""

from __future__ import annotations

import re
from typing import Any, Iterator

import yaml

from tests.conftest import REPO

README = REPO / "config" / "README.md"


def key_paths(node: Any, prefix: str = "") -> Iterator[str]:
    """Every dotted key path of a YAML mapping, inner sections included."""
    if isinstance(node, dict):
        for key, value in node.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            yield path
            yield from key_paths(value, path)


def documented(text: str) -> set[str]:
    """Names written as code spans (`history.actor.mode`) in the README."""
    return set(re.findall(r"`([^`\n]+)`", text))


def test_key_paths_walks_nested_sections():
    assert list(key_paths({"a": {"b": 1, "c": {"d": []}}, "e": {}})) == ["a", "a.b", "a.c", "a.c.d", "e"]
    assert documented("| `a.b` | x `y` |") == {"a.b", "y"}


def test_every_config_key_is_documented():
    with open(REPO / "config" / "config.yaml") as fh:
        config = yaml.safe_load(fh)
    names = documented(README.read_text())
    leaves = [p for p in key_paths(config) if not isinstance(_get(config, p), dict) or not _get(config, p)]
    missing = [p for p in leaves if p not in names]
    assert not missing, (
        f"config/README.md does not document {len(missing)} key(s) of config/config.yaml: "
        + ", ".join(missing)
        + ". Add a row `| `<key>` | <default> | <what it does> |` for each to its section's table in "
          "config/README.md (a new section gets its own heading and table).")
    sections = [k for k, v in config.items() if isinstance(v, dict)]
    headings = re.findall(r"^##+ .*$", README.read_text(), flags=re.M)
    no_heading = [s for s in sections if not any(f"`{s}`" in h for h in headings)]
    assert not no_heading, (f"config/README.md has no heading for the section(s) {', '.join(no_heading)} of "
                            "config/config.yaml; add `## `<section>`: <what it is>` above its table")


def test_every_preset_is_documented():
    names = documented(README.read_text())
    presets = sorted(p.relative_to(REPO / "config").as_posix() for p in (REPO / "config" / "presets").glob("*.yaml"))
    assert presets
    missing = [p for p in presets if p not in names]
    assert not missing, (f"config/README.md does not describe the preset file(s) {', '.join(missing)}; add a "
                         "`### `presets/<name>.yaml`` subsection under `## Presets` in config/README.md saying what "
                         "the preset sets and how to run it")


def test_documented_keys_exist():
    """No stale rows: every dotted path the README's tables name is a key of config.yaml."""
    with open(REPO / "config" / "config.yaml") as fh:
        config = yaml.safe_load(fh)
    paths = set(key_paths(config))
    rows = re.findall(r"^\| `([^`]+)` \|", README.read_text(), flags=re.M)
    assert rows
    stale = [r for r in rows if r not in paths]
    assert not stale, (f"config/README.md documents key(s) that config/config.yaml does not have: "
                       f"{', '.join(stale)}; remove or rename their rows")


def _get(config: dict, path: str) -> Any:
    node: Any = config
    for part in path.split("."):
        node = node[part]
    return node
