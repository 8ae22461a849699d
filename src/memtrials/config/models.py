"""The model registry: its entries (:class:`Endpoint`, :class:`Price`, :class:`EmbeddedWeights`,
:class:`PlantedPolicy`) and their parsing.

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
    """USD per million tokens: input, output, and (where the provider prices it apart) input
    its prefix cache served.  :meth:`cost` is the one price model: ``spend`` (recorded
    calls) and ``estimate`` (a run before any call) both price through it."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None
    """The price of a prompt token the provider served from its prefix cache (``usage.
    prompt_tokens_details.cached_tokens``); None: the registry gives none, cached tokens cost
    ``input_per_mtok`` like the rest."""

    def cost(self, prompt_tokens: float, completion_tokens: float, cached_tokens: float = 0) -> float:
        """USD of a call (or a sum of calls): ``cached_tokens`` of the ``prompt_tokens`` at the
        cached-input price where the registry gives one (else at the input price)."""
        cached = min(max(cached_tokens or 0, 0), prompt_tokens) if self.cached_input_per_mtok is not None else 0
        return ((prompt_tokens - cached) * self.input_per_mtok + cached * (self.cached_input_per_mtok or 0.0)
                + completion_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True)
class EmbeddedWeights:
    """Where an embedded model's weights file lies: one file of one installed distribution,
    or ``parts`` (distribution, file) to join in order; ``sha256`` is of the whole file.  Or
    ``checkpoint``: a folder the calibrator's training rule writes (its manifest
    :data:`CHECKPOINT_MANIFEST` names the GGUF and the checkpoint's content digest, which is
    read when the endpoint is used, never when the registry is loaded)."""

    distribution: str
    file: str
    sha256: str
    ctx_size: int = 4096
    threads: int = 2
    parts: tuple[tuple[str, str], ...] = ()
    checkpoint: str = ""


@dataclass(frozen=True)
class PlantedPolicy:
    """A planted agent (``provider: planted``): ``policy`` is ``<module>:<callable>``, called
    with ``params`` as keyword arguments to build the reply policy ``(body) -> str`` that the
    in-process loopback server answers with (:mod:`memtrials.llm.local.planted`)."""

    policy: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def module(self) -> str:
        return self.policy.partition(":")[0]

    def source_digest(self, source: str = "config/models.yaml") -> str:
        """SHA-256 of the policy module's source file, found without importing it or its
        packages (so a changed planted function changes every key of the endpoint)."""
        return module_digest(self.module, source)


_DIGESTS: dict[tuple[str, int, int], str] = {}


def module_file(module: str, source: str = "config/models.yaml") -> Path:
    """The source file of the dotted ``module``, searched package by package along
    ``sys.path`` (nothing is imported); a :class:`ConfigError` naming the key when absent."""
    import importlib.machinery
    import sys

    path: list[str] | None = list(sys.path)
    spec = None
    for i, part in enumerate(module.split(".")):
        spec = importlib.machinery.PathFinder.find_spec(part, path)
        if spec is None:
            break
        path = list(spec.submodule_search_locations or []) or None
        if path is None and i < len(module.split(".")) - 1:
            spec = None
            break
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise ConfigError(f"{source}: key planted.policy: module {module!r} was not found on the Python path. "
                          f"Fix: name a module of the package (e.g. memtrials.<...>.planted:policy).")
    return Path(spec.origin)


def module_digest(module: str, source: str = "config/models.yaml") -> str:
    """SHA-256 of ``module``'s source file, read once per file version."""
    import hashlib

    path = module_file(module, source)
    st = path.stat()
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _DIGESTS:
        _DIGESTS[key] = hashlib.sha256(path.read_bytes()).hexdigest()
    return _DIGESTS[key]


# the manifest a locally trained checkpoint folder holds (written by the calibrator's SFT
# entry point in the training environment, which names the same file)
CHECKPOINT_MANIFEST = "memtrials-sft.json"
_MANIFESTS: dict[tuple[str, int, int], dict[str, Any]] = {}


def checkpoint_manifest(folder: str | os.PathLike[str], source: str = "config/models.yaml") -> dict[str, Any]:
    """The manifest of a trained checkpoint folder (``digest``: the checkpoint's content
    digest; ``gguf``, ``gguf_sha256``: the file the embedded runtime serves), read once per
    file version; a :class:`ConfigError` naming the fix when it is absent or incomplete."""
    path = Path(folder) / CHECKPOINT_MANIFEST
    try:
        st = path.stat()
    except FileNotFoundError:
        raise ConfigError(f"{source}: checkpoint folder {folder}: no {CHECKPOINT_MANIFEST}. Fix: run the training "
                          f"rule that writes it (e.g. snakemake {path}) before using this endpoint.") from None
    key = (str(path), st.st_mtime_ns, st.st_size)
    if key not in _MANIFESTS:
        import json

        data = json.loads(path.read_text(encoding="utf-8"))
        missing = [k for k in ("digest", "gguf", "gguf_sha256") if not data.get(k)]
        if missing:
            raise ConfigError(f"{path}: keys {missing} missing: not a checkpoint the embedded runtime can serve "
                              "(train it from a GGUF base: the training recipe's base_model names an embedded "
                              "endpoint)")
        _MANIFESTS[key] = data
    return _MANIFESTS[key]


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
    planted: PlantedPolicy | None = None

    @property
    def identity(self) -> dict[str, Any]:
        """What identifies the endpoint in a cache key (never the key itself)."""
        if self.embedded is not None and self.embedded.checkpoint:
            return {"checkpoint": self.checkpoint_digest(), "model": self.model}
        if self.embedded is not None:
            return {"embedded": self.embedded.sha256, "model": self.model}
        if self.planted is not None:
            return {"model": self.model, "planted": self.planted.policy, "planted_params": dict(self.planted.params),
                    "policy_sha256": self.planted.source_digest(self.source)}
        return {"base_url": (self.base_url or "").rstrip("/"), "model": self.model}

    def checkpoint_digest(self) -> str:
        """A locally trained checkpoint's content digest, from its manifest (read at call time,
        so a retrained checkpoint gets new cache keys and never replays the old model's replies)."""
        assert self.embedded is not None and self.embedded.checkpoint
        return str(checkpoint_manifest(self.embedded.checkpoint, self.source)["digest"])

    @property
    def served_alias(self) -> str:
        """The model name every call's record keeps (``model`` column) and the embedded server is
        given as its alias: a trained checkpoint's carries its digest (``<model>@<digest>``), so a
        record names the weights that answered it (the same digest as the call's cache key)."""
        if self.embedded is not None and self.embedded.checkpoint:
            return f"{self.model}@{self.checkpoint_digest()}"
        return self.model

    def cell_params(self) -> dict[str, Any]:
        """What of the entry determines a cell's output (a rule's ``params``; never the key).  A
        trained checkpoint is named by its folder here (it may not exist when the workflow is
        planned); the rules that use it take its manifest as an input."""
        if self.embedded is not None and self.embedded.checkpoint:
            identity: dict[str, Any] = {"checkpoint_folder": self.embedded.checkpoint, "model": self.model}
        else:
            identity = self.identity
        return {"identity": identity, "params": dict(self.params), "structured_output": self.structured_output}

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
        if (raw["provider"] == "planted") != bool(raw.get("planted")):
            raise ConfigError(f"{where}: key planted (policy: <module>:<callable>, params) goes with provider planted "
                              f"and only with it. Fix: give both or neither.")
        if raw["provider"] == "planted" and (raw.get("base_url") or raw.get("api_key_env")):
            raise ConfigError(f"{where}: keys base_url and api_key_env are not allowed for provider planted "
                              f"(the pipeline starts its loopback server in process). Fix: remove them.")
        if raw["provider"] == "planted":
            module_file(raw["planted"]["policy"].partition(":")[0], f"{where}")
        if raw["provider"] == "embedded" and raw.get("base_url"):
            raise ConfigError(f"{where}: key base_url is not allowed for provider embedded (the pipeline starts the server).")
        task = raw.get("task", "chat")
        if task != "embed" and "batch_size" in raw:
            raise ConfigError(f"{where}: key batch_size is only for embedding endpoints. "
                              f"Fix: add task: embed or remove batch_size.")
        emb = dict(raw.get("embedded") or {})
        if emb.get("checkpoint"):
            extra = sorted(set(emb) & {"distribution", "file", "parts", "sha256"})
            if extra:
                raise ConfigError(f"{where}: key embedded: checkpoint (a trained folder) excludes {extra}: the "
                                  f"checkpoint's manifest names its GGUF and digest. Fix: remove {extra}.")
            emb = {"distribution": "", "file": "", "sha256": "", **emb}
        elif emb and not emb.get("sha256"):
            raise ConfigError(f"{where}: key embedded.sha256 is missing (the SHA-256 of the weights file).")
        elif emb:
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
            planted=(PlantedPolicy(raw["planted"]["policy"], dict(raw["planted"].get("params") or {}))
                     if raw.get("planted") else None),
        )
    return endpoints


def load_models(path: str | os.PathLike[str]) -> dict[str, Endpoint]:
    path = Path(path)
    return parse_models(load_yaml(path, "model registry that key models_file names"), str(path))
