"""The YAML (and JSON) loader for every file the project reads from the user, and the overlay merge.

Every YAML file the project reads from the user (the config, overlays, registries,
presets) goes through :func:`load_yaml`: a mapping key given twice is an error (plain
YAML keeps the last one silently), as are a folder, an empty file and a syntax error,
each named with its file (and line and column).  :func:`merge` applies overlays key by
key, as Snakemake applies ``--configfile``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from memtrials.config.errors import ConfigError


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping that gives one key twice."""


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses a mapping key given twice (safe_load keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: let SafeLoader say so
                continue
            if first is not None:
                raise DuplicateKeyError(
                    None, None,
                    f"key {key!r} appears twice in one mapping (first at line {first.start_mark.line + 1}, again at "
                    f"line {key_node.start_mark.line + 1}); YAML would silently keep only the last",
                    key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def load_yaml(path: str | os.PathLike[str], what: str = "config file") -> Any:
    """Parse a user's YAML file, refusing duplicate keys; a :class:`ConfigError` names the
    file, the line and column, and the fix for a missing file, a folder, a syntax error or a
    duplicate key.  ``what`` says what the file is for (in messages)."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: file not found. Fix: create it or point to it (models_file / --configfile).")
    if path.is_dir():
        raise ConfigError(f"{path}: is a folder, not a YAML file (expected the {what}). Fix: name the file itself, "
                          f"e.g. {path / 'models.yaml' if 'regist' in what else path / 'config.yaml'}.")
    if path.suffix == ".json":  # Snakemake takes JSON config files too
        return _load_json(path)
    try:
        with open(path, encoding="utf-8") as fh:
            return yaml.load(fh, Loader=UniqueKeyLoader)  # noqa: S506 (a SafeLoader)
    except DuplicateKeyError as exc:
        mark = exc.problem_mark
        raise ConfigError(f"{path}: line {mark.line + 1}, column {mark.column + 1}: {exc.problem}. "
                          f"Fix: keep one of the two (merge their contents) and delete the other.") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else "somewhere"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        raise ConfigError(f"{path}: not valid YAML at {where}: {problem}{f' ({context})' if context else ''}. "
                          f"Fix: correct the syntax there (indent with spaces, close every bracket and "
                          f"quote).") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}). Fix: save it as UTF-8.") from None


def _load_json(path: Path) -> Any:
    """A JSON config file, refusing duplicate keys, with messages like :func:`load_yaml`'s."""
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in pairs:
            if key in out:
                raise ConfigError(f"{path}: key {key!r} appears twice in one object; JSON readers would silently "
                                  f"keep only the last. Fix: keep one of the two (merge their contents).")
            out[key] = value
        return out

    text = path.read_text(encoding="utf-8")
    if not text.strip():
        return None
    try:
        return json.loads(text, object_pairs_hook=unique)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}. "
                          f"Fix: correct the syntax there.") from None


def load_overlay(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A ``--configfile`` overlay: a non-empty mapping of config keys (see :func:`load_yaml`)."""
    data = load_yaml(path, "config overlay")
    if data is None:
        raise ConfigError(f"{path}: the file is empty; an overlay is a mapping of the config keys it changes. "
                          f"Fix: add those keys (e.g. 'panel: [smollm2]'), or drop --configfile {path}.")
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of config keys at the top level, got a "
                          f"{type(data).__name__}. Fix: write it as 'key: value' lines, like config/config.yaml.")
    return data


def check_config_files(paths: Iterable[str | os.PathLike[str]]) -> None:
    """Re-read the config files Snakemake merged (``configfile:`` and ``--configfile``) with
    :func:`load_yaml`, which Snakemake's own loader is not: duplicate keys, empty files."""
    for path in dict.fromkeys(str(p) for p in paths):
        load_overlay(path)


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive dict merge as Snakemake applies ``--configfile`` overlays."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out
