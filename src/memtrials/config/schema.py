"""JSON-schema validation of the config and the registry, with messages that name the key and the fix.

Both files are checked against the JSON schemas in ``config/schemas/`` (the same schemas
``workflow/rules/common.smk`` hands to ``snakemake.utils.validate``); :func:`validate`
reports every violation with its key (and, for a :class:`~memtrials.config.sources.Sources`,
the file that set it), never showing an ``api_key_env`` value.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

import jsonschema
import yaml

from memtrials.config.errors import REPO_ROOT, ConfigError
from memtrials.config.keys import api_key_env_message, secrets_in
from memtrials.config.sources import CLI_CONFIG, Sources, key_source

SCHEMA_DIR = REPO_ROOT / "config" / "schemas"


def load_schema(name: str) -> dict[str, Any]:
    with open(SCHEMA_DIR / name) as fh:
        return json.load(fh)


def _describe(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.absolute_path and error.absolute_path[-1] == "api_key_env":
        return api_key_env_message(where, error.instance)
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in error.schema.get("properties", {})]
        hint = f" allowed keys: {', '.join(allowed)}" if allowed else ""
        return f"key {where}: unknown key(s) {', '.join(map(repr, extra))}.{hint}"
    if error.validator == "required":
        return f"key {where}: {error.message}. Fix: add it."
    if error.validator == "propertyNames":
        return f"key {where}: name {error.instance!r} is not allowed ({error.message})"
    return f"key {where}: {error.message}. Fix: correct the value (config/README.md describes the key)."


def _error_path(error: jsonschema.ValidationError) -> list[Any]:
    """The key path a schema error is about (an unknown key: the key itself)."""
    path = list(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, Mapping):
        extra = [k for k in error.instance if k not in error.schema.get("properties", {})]
        path += extra[:1]
    return path


def _cli_string_hint(error: jsonschema.ValidationError, origin: str) -> str:
    """Snakemake's ``--config`` reads a nested value with YAML's base loader, so every scalar
    in it is a string (``history={tasks_per_cell: 2}`` gives ``'2'``): say so where a number
    or a boolean was refused as a string from there."""
    if origin != CLI_CONFIG or error.validator != "type" or not isinstance(error.instance, str):
        return ""
    try:
        meant = yaml.safe_load(error.instance)
    except yaml.YAMLError:
        return ""
    if isinstance(meant, str) or meant is None and error.instance.strip() not in ("null", "~", ""):
        return ""
    return (f" (Snakemake's --config passes a value inside {{...}} as the string {error.instance!r}, not "
            f"{json.dumps(meant)}: set it in a --configfile overlay instead)")


def validate(data: Any, schema: Mapping[str, Any], source: str | Sources) -> None:
    """Validate ``data``; raise :class:`ConfigError` listing every violation with its key
    (and, for a :class:`Sources`, the file that set it)."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        errors = errors[:10]
        origins = [key_source(source, _error_path(e)) for e in errors]
        single = len(set(origins)) == 1
        lines = "\n  ".join(_describe(e) + _cli_string_hint(e, o) + ("" if single else f" [set in {o}]")
                             for e, o in zip(errors, origins))
        for secret in sorted(set(secrets_in(data)), key=len, reverse=True):  # e.g. inside a whole-entry repr
            lines = lines.replace(secret, "<api_key_env value not shown>")
        raise ConfigError(f"{origins[0] if single else source}: invalid configuration:\n  {lines}")
