"""Load and validate the pipeline config and the model registry.

Both files are checked against the JSON schemas in ``config/schemas/`` (the same
schemas ``workflow/rules/common.smk`` hands to ``snakemake.utils.validate``), then
against the cross-file rules a schema cannot state (panel names exist, an embedded
entry names its weights, an ``openai`` entry names its URL).  Every failure is a
:class:`ConfigError` whose message names the file, the key and the fix.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import jsonschema
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
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


def _load_yaml(path: Path) -> Any:
    if not path.exists():
        raise ConfigError(f"{path}: file not found. Fix: create it or point to it (models_file / --configfile).")
    try:
        with open(path) as fh:
            return yaml.safe_load(fh)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc}). Fix: correct the syntax at the position shown.") from None


def load_schema(name: str) -> dict[str, Any]:
    with open(SCHEMA_DIR / name) as fh:
        return json.load(fh)


def _describe(error: jsonschema.ValidationError) -> str:
    where = ".".join(str(p) for p in error.absolute_path) or "(top level)"
    if error.validator == "additionalProperties":
        allowed = sorted(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in error.schema.get("properties", {})]
        hint = f" allowed keys: {', '.join(allowed)}" if allowed else ""
        return f"key {where}: unknown key(s) {', '.join(map(repr, extra))}.{hint}"
    if error.validator == "required":
        return f"key {where}: {error.message}. Fix: add it."
    if error.validator == "propertyNames":
        return f"key {where}: name {error.instance!r} is not allowed ({error.message})"
    return f"key {where}: {error.message}"


def validate(data: Any, schema: Mapping[str, Any], source: str) -> None:
    """Validate ``data``; raise :class:`ConfigError` listing every violation with its key."""
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path])
    if errors:
        lines = "\n  ".join(_describe(e) for e in errors[:10])
        raise ConfigError(f"{source}: invalid configuration:\n  {lines}")


def parse_models(data: Any, source: str = "config/models.yaml") -> dict[str, Endpoint]:
    """Validate a registry document and return its endpoints by name."""
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: expected a mapping with key 'endpoints', got {type(data).__name__}.")
    validate(data, load_schema("models.schema.json"), source)
    endpoints: dict[str, Endpoint] = {}
    for name, raw in data["endpoints"].items():
        where = f"{source}: endpoint '{name}'"
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
            embedded=EmbeddedWeights(**emb) if emb else None,
            source=source,
            task=task,
            batch_size=int(raw.get("batch_size", 64)),
        )
    return endpoints


def load_models(path: str | os.PathLike[str]) -> dict[str, Endpoint]:
    path = Path(path)
    return parse_models(_load_yaml(path), str(path))


def check_config(config: Mapping[str, Any], source: str = "config/config.yaml") -> dict[str, Endpoint]:
    """Validate a pipeline config and its registry; return the registry.

    Checks the schema, that the registry exists and is valid, that every name in
    ``panel`` and ``roles`` is a registry entry, that the panel and every role but
    ``embedder`` name chat endpoints, and that ``roles.embedder`` names an endpoint that
    can embed (``task: embed``, or an ``openai`` entry whose server also serves
    ``/v1/embeddings``; the client says so clearly if it does not).
    """
    validate(dict(config), load_schema("config.schema.json"), source)
    models_path = Path(config["models_file"])
    if not models_path.is_absolute() and not models_path.exists():
        models_path = REPO_ROOT / models_path
    models = load_models(models_path)
    for key, names in (("panel", config["panel"]), ("roles", list((config.get("roles") or {}).values()))):
        for name in names:
            if name not in models:
                raise ConfigError(
                    f"{source}: key {key}: model '{name}' is not in {config['models_file']} "
                    f"(known: {', '.join(sorted(models))}). Fix: add an entry for it or correct the name."
                )
    roles = dict(config.get("roles") or {})
    for key, name in [("panel", n) for n in config["panel"]] + [(f"roles.{r}", n) for r, n in roles.items()]:
        ep = models[name]
        if key == "roles.embedder":
            if ep.task != "embed" and ep.provider != "openai":
                embedders = [n for n, e in sorted(models.items()) if e.task == "embed"]
                raise ConfigError(
                    f"{source}: key roles.embedder: endpoint '{name}' of {config['models_file']} is an embedded "
                    f"chat model and serves no embeddings. Fix: name an embedding endpoint (task: embed; in the "
                    f"registry: {', '.join(embedders) or 'none'}), e.g. the embedded embedder minilm."
                )
        elif ep.task != "chat":
            raise ConfigError(
                f"{source}: key {key}: endpoint '{name}' of {config['models_file']} is an embedding endpoint "
                f"(task: embed) and cannot answer chat calls. Fix: name a chat endpoint here; embedding "
                f"endpoints belong in roles.embedder."
            )
    return models


def load_config(path: str | os.PathLike[str], overlays: Iterable[str | os.PathLike[str]] = ()) -> dict[str, Any]:
    """Load a config file (plus overlays, merged key by key) and validate it."""
    config = _load_yaml(Path(path))
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level.")
    for overlay in overlays:
        config = merge(config, _load_yaml(Path(overlay)) or {})
    check_config(config, str(path))
    return config


def merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Recursive dict merge as Snakemake applies ``--configfile`` overlays."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out
