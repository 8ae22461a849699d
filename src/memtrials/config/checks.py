"""The checks of a whole pipeline config: its schema, its registry and the names in it, its cache path.

:func:`check_config` validates a config against ``config.schema.json``, then against the
cross-file rules a schema cannot state (panel and role names exist in the registry and
fit their role, ``cache.path`` is writable); :func:`check_layers` and :func:`load_config`
check a merge of files, naming the file that set a rejected key.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from memtrials.config.errors import REPO_ROOT, ConfigError
from memtrials.config.load import load_overlay, merge
from memtrials.config.models import Endpoint, load_models
from memtrials.config.schema import load_schema, validate
from memtrials.config.sources import Sources, key_source


def check_layers(files: list[str], layers: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Check the merge of config files; a rejected key is named with the last file that
    sets it (:class:`Sources`)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = merge(merged, layer)
    check_config(merged, Sources(zip(files, layers)))
    return merged


def check_config(config: Mapping[str, Any], source: str | Sources = "config/config.yaml") -> dict[str, Endpoint]:
    """Validate a pipeline config and its registry; return the registry.

    Checks the schema, that the registry exists and is valid, that every name in
    ``panel`` and ``roles`` is a registry entry, that the panel and every role but
    ``embedder`` name chat endpoints, and that ``roles.embedder`` names an endpoint that
    can embed (``task: embed``, or an ``openai`` entry whose server also serves
    ``/v1/embeddings``; the client says so clearly if it does not).
    """
    schema = load_schema("config.schema.json")
    validate(dict(config), schema, source)
    known_roles = sorted(schema["properties"]["roles"].get("properties", {}))
    unknown_roles = sorted(set(config.get("roles") or {}) - set(known_roles))
    if known_roles and unknown_roles:
        raise ConfigError(f"{key_source(source, ['roles', unknown_roles[0]])}: key roles: unknown role(s) {', '.join(map(repr, unknown_roles))} (known: "
                          f"{', '.join(known_roles)}). Fix: correct the name (a misspelt role leaves the real one "
                          f"on its default) or remove it.")
    check_cache_path(config, source)
    models_path = Path(config["models_file"])
    if not models_path.is_absolute() and not models_path.exists():
        models_path = REPO_ROOT / models_path
    models = load_models(models_path)
    named = [("panel", n) for n in config["panel"]] + [(f"roles.{r}", n) for r, n in (config.get("roles") or {}).items()]
    for key, name in named:
        if name not in models:
            raise ConfigError(
                f"{key_source(source, key)}: key {key.split('.')[0]}: model '{name}' is not in {config['models_file']} "
                f"(key {key}; known: {', '.join(sorted(models))}). Fix: add an entry for it or correct the name."
            )
    for key, name in named:
        ep = models[name]
        if key == "roles.embedder":
            if ep.task != "embed" and ep.provider != "openai":
                embedders = [n for n, e in sorted(models.items()) if e.task == "embed"]
                raise ConfigError(
                    f"{key_source(source, key)}: key roles.embedder: endpoint '{name}' of {config['models_file']} is an embedded "
                    f"chat model and serves no embeddings. Fix: name an embedding endpoint (task: embed; in the "
                    f"registry: {', '.join(embedders) or 'none'}), e.g. the embedded embedder minilm."
                )
        elif ep.task != "chat":
            raise ConfigError(
                f"{key_source(source, key)}: key {key}: endpoint '{name}' of {config['models_file']} is an embedding endpoint "
                f"(task: embed) and cannot answer chat calls. Fix: name a chat endpoint here; embedding "
                f"endpoints belong in roles.embedder."
            )
    return models


def _unwritable(folder: Path) -> str | None:
    """Why files cannot be made in ``folder`` (created with its parents if missing), or None."""
    probe = folder
    while not probe.exists():
        if probe.is_symlink():  # a dangling link: mkdir would fail on it
            return f"{probe} is a link to nothing"
        probe = probe.parent
    if not probe.is_dir():
        return f"{probe} is a file, not a folder"
    import tempfile

    try:  # a real try, not os.access: root passes access() on read-only mounts and /proc
        os.rmdir(tempfile.mkdtemp(prefix=".memtrials-write-check-", dir=probe))
    except OSError as exc:
        return f"{probe} is not writable ({exc.strerror or exc})" + (
            f", so {folder} cannot be made" if probe != folder else "")
    return None


def check_cache_path(config: Mapping[str, Any], source: str | Sources = "config/config.yaml") -> None:
    """``cache.path`` names a place the run can write: the cache file (``sqlite``; ``shards/`` and
    ``claims/`` beside it for ``shards``) and the call records in ``<its grandparent>/records``.
    Checked before the first job, so that a path under a file or a read-only folder is not a
    traceback inside the first cell that calls a model."""
    path = Path(config["cache"]["path"])
    where = f"{key_source(source, 'cache.path')}: key cache.path"
    if path.is_dir() and config["cache"].get("backend", "sqlite") == "sqlite":
        raise ConfigError(f"{where}: {path} is a folder; the sqlite backend keeps the cache in one file. "
                          f"Fix: name a file, e.g. {path / 'llm.sqlite'}.")
    for folder, what in ((path.parent, "the cache's folder"), (path.parent.parent / "records", "the call records")):
        why = _unwritable(folder)
        if why is not None:
            raise ConfigError(f"{where}: {what} cannot be written at {folder}: {why}. Fix: point cache.path at a "
                              f"writable place (the default is results/cache/llm.sqlite; the records go to "
                              f"<its folder's parent>/records).")


def load_config(path: str | os.PathLike[str], overlays: Iterable[str | os.PathLike[str]] = ()) -> dict[str, Any]:
    """Load a config file (plus overlays, merged key by key) and validate it."""
    files = [str(path), *(str(o) for o in overlays)]
    return check_layers(files, [load_overlay(f) for f in files])
