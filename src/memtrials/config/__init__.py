"""Load and validate the pipeline config and the model registry.

Both files are checked against the JSON schemas in ``config/schemas/`` (the same
schemas ``workflow/rules/common.smk`` hands to ``snakemake.utils.validate``), then
against the cross-file rules a schema cannot state (panel names exist, an embedded
entry names its weights, an ``openai`` entry names its URL).  Every failure is a
:class:`ConfigError` whose message names the file, the key and the fix.

Every YAML file the project reads from the user (the config, overlays, registries,
presets) goes through :func:`load_yaml`: a mapping key given twice is an error (plain
YAML keeps the last one silently), as are a folder, an empty file and a syntax error,
each named with its file (and line and column).  A rejected ``api_key_env`` is never
printed (it may be a pasted key, and messages end up in ``.snakemake/log/``), and a
value shaped like a key is rejected even when it would pass as a variable name.

A config merged from several files (``config/config.yaml``, ``--configfile`` overlays,
``--config`` on the command line) is checked with a :class:`Sources`: each rejected key
is reported against the last file, in Snakemake's merge order, that sets it.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import jsonschema
import yaml

REPO_ROOT = Path(__file__).resolve().parents[3]
SCHEMA_DIR = REPO_ROOT / "config" / "schemas"


class ConfigError(ValueError):
    """A configuration problem, stated with its file, key and fix."""


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True)
class EmbeddedWeights:
    """Where an embedded model's weights file lies: one file of one installed distribution,
    or ``parts`` (distribution, file) to join in order; ``sha256`` is of the whole file."""

    distribution: str
    file: str
    sha256: str
    ctx_size: int = 4096
    threads: int = 2
    parts: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Endpoint:
    """One entry of the model registry (the ``{model}`` wildcard is ``name``)."""

    name: str
    provider: str
    model: str
    max_concurrency: int
    params: Mapping[str, Any]
    structured_output: bool
    price: Price
    base_url: str | None = None
    api_key_env: str | None = None
    rpm: float | None = None
    tpm: float | None = None
    grammar: bool = False
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    serving: Mapping[str, Any] = field(default_factory=dict)
    embedded: EmbeddedWeights | None = None
    source: str = "config/models.yaml"
    task: str = "chat"
    batch_size: int = 64

    @property
    def identity(self) -> dict[str, Any]:
        """What identifies the endpoint in a cache key (never the key itself)."""
        if self.embedded is not None:
            return {"embedded": self.embedded.sha256, "model": self.model}
        return {"base_url": (self.base_url or "").rstrip("/"), "model": self.model}

    def cell_params(self) -> dict[str, Any]:
        """What of the entry determines a cell's output (a rule's ``params``; never the key)."""
        return {"identity": self.identity, "params": dict(self.params), "structured_output": self.structured_output}

    def api_key(self) -> str:
        """Read the key from the environment at call time (never stored anywhere)."""
        if not self.api_key_env:
            return "EMPTY"
        value = os.environ.get(self.api_key_env)
        if not value:
            raise ConfigError(
                f"{self.source}: endpoint '{self.name}' reads its key from the environment "
                f"variable {self.api_key_env}, which is not set. Fix: export {self.api_key_env}=<your key> "
                f"before running (or remove 'api_key_env' if the server needs no key)."
            )
        return value


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


def check_layers(files: list[str], layers: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Check the merge of config files; a rejected key is named with the last file that
    sets it (:class:`Sources`)."""
    merged: dict[str, Any] = {}
    for layer in layers:
        merged = merge(merged, layer)
    check_config(merged, Sources(zip(files, layers)))
    return merged


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


# -- keys pasted where a variable's name belongs ------------------------------------
_KEY_PREFIXES = {  # lower-cased prefix -> whose key it looks like
    "sk-or-": "an OpenRouter key", "sk-ant-": "an Anthropic key", "sk-proj-": "an OpenAI project key",
    "sk-": "an OpenAI-style secret key", "sk_": "a secret key", "hf_": "a Hugging Face token",
    "gsk_": "a Groq key", "aiza": "a Google API key", "xai-": "an xAI key", "pplx-": "a Perplexity key",
    "r8_": "a Replicate token", "ghp_": "a GitHub token", "github_pat_": "a GitHub token",
    "glpat-": "a GitLab token", "nvapi-": "an NVIDIA key", "akia": "an AWS access key", "fw_": "a Fireworks key",
}


def key_shape(value: str) -> str | None:
    """Why ``value`` looks like a secret rather than a variable name (``None``: it does not).

    Known prefixes (case-insensitive; followed by a long token where a name could start so), any ``_``-separated part of
    16 or more characters, a part of 10 or more with 3 or more digits, a part that flips
    between letters and digits 4 or more times, or a value over 64 characters.  A variable
    name is words: OPENAI_API_KEY, AZURE_OPENAI_API_KEY, HF_TOKEN pass.
    """
    low = value.lower()
    for prefix, whose in _KEY_PREFIXES.items():
        rest = value[len(prefix):]
        # a name cannot hold '-', so a dash prefix needs little after it; others a long token
        longest = max(len(part) for part in rest.replace("-", "_").split("_"))
        if low.startswith(prefix) and (longest >= 3 if prefix.endswith("-") else longest >= 12):
            return f"it starts like {whose}"
    if len(value) > 64:
        return "it is longer than any variable name"
    for part in value.replace("-", "_").split("_"):
        digits = sum(c.isdigit() for c in part)
        flips = sum(a.isdigit() != b.isdigit() for a, b in zip(part, part[1:]))
        if len(part) >= 16:
            return "it holds a long random-looking token"
        if len(part) >= 10 and digits >= 3 or len(part) >= 8 and flips >= 4:
            return "it mixes letters and digits like a token"
    return None


def _api_key_env_message(where: str, value: Any) -> str:
    shape = key_shape(value) if isinstance(value, str) else None
    what = (f"looks like an API key itself ({shape}), not the name of a variable" if shape
            else "is not the NAME of an environment variable (upper-case letters, digits and _)")
    fix = ("Fix: put the NAME of an environment variable there (e.g. api_key_env: OPENAI_API_KEY) and export "
           "the key in it before running (export OPENAI_API_KEY=<the key>; keep the key out of every file).")
    if shape:
        fix += " If this file was shared or committed, revoke that key."
    return f"key {where}: the value {what}; it is not shown here so that it stays out of logs. {fix}"


def _secrets(data: Any) -> list[str]:
    """Every string under a key ``api_key_env`` in ``data`` (never printed in a message)."""
    found: list[str] = []
    if isinstance(data, Mapping):
        for k, v in data.items():
            if k == "api_key_env" and isinstance(v, str) and v:
                found.append(v)
            else:
                found.extend(_secrets(v))
    elif isinstance(data, list):
        for v in data:
            found.extend(_secrets(v))
    return found


def load_schema(name: str) -> dict[str, Any]:
    with open(SCHEMA_DIR / name) as fh:
        return json.load(fh)


def _describe(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.absolute_path and error.absolute_path[-1] == "api_key_env":
        return _api_key_env_message(where, error.instance)
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
        for secret in sorted(set(_secrets(data)), key=len, reverse=True):  # e.g. inside a whole-entry repr
            lines = lines.replace(secret, "<api_key_env value not shown>")
        raise ConfigError(f"{origins[0] if single else source}: invalid configuration:\n  {lines}")


def parse_models(data: Any, source: str = "config/models.yaml") -> dict[str, Endpoint]:
    """Validate a registry document and return its endpoints by name."""
    if data is None:
        raise ConfigError(f"{source}: the file is empty. Fix: list the endpoints under 'endpoints:' "
                          f"(see config/models.yaml).")
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with key 'endpoints', got {type(data).__name__}.")
    validate(data, load_schema("models.schema.json"), source)
    endpoints: dict[str, Endpoint] = {}
    for name, raw in data["endpoints"].items():
        where = f"{source}: endpoint '{name}'"
        if raw.get("api_key_env") and key_shape(raw["api_key_env"]):
            raise ConfigError(f"{source}: {_api_key_env_message(f'endpoints.{name}.api_key_env', raw['api_key_env'])}")
        if raw["provider"] == "openai" and not raw.get("base_url"):
            raise ConfigError(f"{where}: key base_url is missing. Fix: add base_url: https://<host>/v1.")
        if raw["provider"] == "embedded" and not raw.get("embedded"):
            raise ConfigError(f"{where}: key embedded is missing (distribution, file, sha256 of the weights file).")
        if raw["provider"] == "embedded" and raw.get("base_url"):
            raise ConfigError(f"{where}: key base_url is not allowed for provider embedded (the pipeline starts the server).")
        task = raw.get("task", "chat")
        if task != "embed" and "batch_size" in raw:
            raise ConfigError(f"{where}: key batch_size is only for embedding endpoints. "
                              f"Fix: add task: embed or remove batch_size.")
        emb = dict(raw.get("embedded") or {})
        if emb:
            parts = tuple((p["distribution"], p["file"]) for p in emb.pop("parts", []))
            single = bool(emb.get("distribution")) and bool(emb.get("file"))
            if bool(parts) == single:
                raise ConfigError(f"{where}: key embedded: give either distribution and file, or parts "
                                  f"(a file split over several distributions), not both and not neither.")
            emb = {"distribution": "", "file": "", **emb, "parts": parts}
        endpoints[name] = Endpoint(
            name=name,
            provider=raw["provider"],
            model=raw["model"],
            max_concurrency=raw["max_concurrency"],
            params=dict(raw.get("params") or {}),
            structured_output=raw.get("structured_output", False),
            price=Price(**raw["price"]),
            base_url=raw.get("base_url"),
            api_key_env=raw.get("api_key_env"),
            rpm=raw.get("rpm"),
            tpm=raw.get("tpm"),
            grammar=raw.get("grammar", False),
            extra_body=dict(raw.get("extra_body") or {}),
            serving=dict(raw.get("serving") or {}),
            embedded=EmbeddedWeights(**emb) if emb else None,
            source=source,
            task=task,
            batch_size=int(raw.get("batch_size", 64)),
        )
    return endpoints


def load_models(path: str | os.PathLike[str]) -> dict[str, Endpoint]:
    path = Path(path)
    return parse_models(load_yaml(path, "model registry that key models_file names"), str(path))


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


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive dict merge as Snakemake applies ``--configfile`` overlays."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out

