"""Which file of a merged config set a key: :class:`Sources`, :func:`key_source`, :func:`config_sources`.

A config merged from several files (``config/config.yaml``, ``--configfile`` overlays,
``--config`` on the command line) is checked with a :class:`Sources`: each rejected key
is reported against the last file, in Snakemake's merge order, that sets it.
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable, Mapping, Sequence

from memtrials.config.load import load_overlay

CLI_CONFIG = "--config on the command line"


def _sets(layer: Any, path: Sequence[Any]) -> bool:
    """Does ``layer`` set the value at ``path`` (or a value above it that is not a mapping,
    such as the list that holds item ``panel.0``)?  The merge replaces all but mappings."""
    node = layer
    for key in path:
        if not isinstance(node, Mapping):
            return True
        if key not in node:
            return False
        node = node[key]
    return True


class Sources:
    """Which file of a merged config set each key: ``layers`` are ``(name, mapping)`` in
    merge order (Snakemake: the Snakefile's ``configfile:``, the ``--configfile`` overlays
    in the order given, then ``--config``), the last one that sets a key wins."""

    def __init__(self, layers: Iterable[tuple[str, Mapping[str, Any]]]):
        self.layers = [(str(name), layer) for name, layer in layers]

    def __str__(self) -> str:
        return " + ".join(name for name, _ in self.layers) or "config"

    def of(self, path: str | Sequence[Any]) -> str:
        """The file that set ``path`` (a key path, dotted or as a sequence); every file
        when none does alone (the top level, a key no file sets)."""
        parts = path.split(".") if isinstance(path, str) else list(path)
        if not parts:
            return str(self)
        found = None
        for name, layer in self.layers:
            if _sets(layer, parts):
                found = name
        return found or str(self)

    def sets(self, path: str | Sequence[Any]) -> bool:
        parts = path.split(".") if isinstance(path, str) else list(path)
        return bool(parts) and any(_sets(layer, parts) for _, layer in self.layers)

    def explain(self, error: BaseException | str) -> str:
        """A message of a later check (a study's, ``config key X: ...``) with the file that
        set its key in front, and the files of the other keys it names where they differ."""
        text = str(error)
        if text.startswith(f"{self}: "):
            text = text[len(str(self)) + 2:]
        keys = [k for k in dict.fromkeys(_KEY_NAMES.findall(text)) if self.sets(k)]
        main = _FIRST_KEY.search(text)
        first = main.group(1) if main and self.sets(main.group(1)) else (keys[0] if keys else None)
        if first is None:
            return text if text.startswith(str(self)) else f"{self}: {text}"
        origin = self.of(first)
        others = [f"{k} is set in {self.of(k)}" for k in keys if k != first and self.of(k) != origin]
        return f"{origin}: {text}" + (f" ({'; '.join(others)})" if others else "")


_FIRST_KEY = re.compile(r"\bkeys? ([A-Za-z_][\w-]*(?:\.[\w-]+)*)")
_KEY_NAMES = re.compile(r"(?<![\w./-])([A-Za-z_]\w*(?:\.[\w-]+)+)")


def key_source(source: str | Sources, path: str | Sequence[Any]) -> str:
    """The file to name for a rejected key: ``source`` itself, or the file of
    :class:`Sources` that set ``path``."""
    return source.of(path) if isinstance(source, Sources) else str(source)


def _display(path: str | os.PathLike[str]) -> str:
    """A config file's name as a user would type it: relative to the working folder when inside it."""
    text = os.fspath(path)
    try:
        rel = os.path.relpath(text)
    except ValueError:
        return text
    return rel if not rel.startswith("..") else text


def config_sources(files: Iterable[str | os.PathLike[str]], overlays: Iterable[str | os.PathLike[str]] = (),
                   cli_config: Mapping[str, Any] | None = None, replace: bool = False) -> Sources:
    """The :class:`Sources` of a Snakemake run: ``files`` the Snakefile's ``configfile:``
    (dropped with ``--replace-workflow-config``), ``overlays`` the ``--configfile`` files,
    ``cli_config`` the ``--config`` values.  Each file is re-read by :func:`load_overlay`
    (duplicate keys, empty files: what Snakemake's loader lets through)."""
    over = list(dict.fromkeys(os.path.abspath(o) for o in overlays))
    base = [f for f in dict.fromkeys(os.fspath(f) for f in files) if os.path.abspath(f) not in over]
    layers = [(_display(f), load_overlay(f)) for f in ([] if replace else base) + over]
    if cli_config:
        layers.append((CLI_CONFIG, dict(cli_config)))
    return Sources(layers)
