"""The model registry: its entries (:class:`Endpoint`, :class:`Price`, :class:`EmbeddedWeights`) and their parsing.

``config/models.yaml`` (or the file key ``models_file`` names) is checked against
``models.schema.json``, then against the rules a schema cannot state (an embedded entry
names its weights, an ``openai`` entry names its URL, ``api_key_env`` is not a key itself).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from memtrials.config.errors import ConfigError
from memtrials.config.keys import api_key_env_message, key_shape
from memtrials.config.load import load_yaml
from memtrials.config.schema import load_schema, validate


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
            raise ConfigError(f"{source}: {api_key_env_message(f'endpoints.{name}.api_key_env', raw['api_key_env'])}")
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
