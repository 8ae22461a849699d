"""The study interface: what a study's rules file asks of the config, written once (:class:`Study`).

A study is one subpackage of :mod:`memtrials.studies` with one rules file; the registry
(:mod:`memtrials.studies`) lists the studies, and both the workflow (``workflow/rules/
common.smk``: ``study(name)``) and ``python -m memtrials config check`` build every
registered study through it.  This module names no study.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Iterable, Mapping, Sequence

from memtrials.config import ConfigError

NOT_CODE = ("memtrials.config", "memtrials.io", "memtrials.llm", "memtrials.pipeline.rule_entry", "memtrials.testing")
"""Imported by every part but not deciding its outputs: config parsing (its values are in
the rule's params), atomic writing, the model layer (its cache replays the calls), rule
plumbing and the loopback server."""


def alternatives(values: Iterable[str], escape: str = "-") -> str:
    """A wildcard constraint matching exactly ``values`` (each character of ``escape``
    escaped), or ``NONE`` (matching no path of the study) when there are none."""
    out = []
    for v in values:
        for c in escape:
            v = v.replace(c, "\\" + c)
        out.append(v)
    return "|".join(out) or "NONE"


def design_gap(model: str, models: Sequence[str], envs: Sequence[str], arms: Sequence[str], have: Sequence[str], *,
               section: str, arms_key: str) -> str | None:
    """Why a headline comparing ``arms`` at endpoint ``model`` cannot run under a study's design
    (``section``: its config section; ``models``, ``envs``: its endpoints and environments;
    ``have``: the arms it runs, the config key ``arms_key``), naming the key that adds what is
    missing; None when nothing is."""
    if model not in models:
        return f"{model} is not in {section}.models (null: the panel); add it there"
    if not envs:
        return f"{section}.envs is empty; name an environment"
    missing = [a for a in arms if a not in have]
    if missing:
        return f"{arms_key} lacks {', '.join(missing)}; add them to compare {' and '.join(arms)}"
    return None


class Study(ABC):
    """One section of the config, resolved for the study's rules file.

    A study sets these class attributes:

    - ``name``: its config section, its rules file ``workflow/rules/<name>.smk``, its results
      folder ``results/<name>/``, its docs page ``docs/<name>.md`` and its registry name;
    - ``package``: its dotted package (``memtrials.studies.<name>``), where its code is read;
    - ``parts``: the parts of its rules, the names :meth:`code` takes;
    - ``code_modules``: per part, the modules of ``package`` (relative names) whose source and
      every package module they import decide the part's outputs;
    - ``entry_parts``: the parts whose code also lists ``package``'s ``entry.py`` itself (the
      rule's entry point, not what it imports: it imports every part).

    The constructor takes ``(config, models, endpoint)``: the merged config, the model
    registry (name -> :class:`memtrials.config.Endpoint`) and a function from an endpoint
    name to the params that decide a cell's output (never a key).  It refuses a config
    without the study's section, keeps the section as ``section`` (every key is required,
    so no second default is read anywhere), sets ``enabled`` from its ``enabled`` key, lets
    the study read the rest (:meth:`resolve`) and, when enabled, runs :meth:`check`, which
    raises :class:`ConfigError` naming the key before any job runs.

    What the rules read: :meth:`code` (a rule's ``code`` input: an edited module reruns the
    part, and the model cache replays its unchanged calls), :meth:`api` (the ``api``
    resource), :meth:`final_targets` (what the target rule ``all`` asks of the study), and
    the study's own config slices (``cell(...)``, ``slice()``): everything of the config
    that decides a job's output, passed as the rule's params (a changed slice reruns the job).
    """

    name: ClassVar[str]
    package: ClassVar[str]
    parts: ClassVar[tuple[str, ...]] = ()
    code_modules: ClassVar[Mapping[str, tuple[str, ...]]] = {}
    entry_parts: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: Mapping[str, Any], models: Mapping[str, Any],
                 endpoint: Callable[[str], Mapping[str, Any]]) -> None:
        if self.name not in config:
            raise ConfigError(f"config key {self.name}: missing; copy the {self.name} section of config/config.yaml "
                              "(every key is required)")
        self.config = config
        self.section = dict(config[self.name])
        self.models_registry = models
        self.endpoint = endpoint
        self.enabled = bool(self.section["enabled"])
        self.resolve()
        if self.enabled:
            self.check()

    def resolve(self) -> None:
        """Read what the rules need from :attr:`section` (and the config) into attributes;
        runs before :meth:`check`, whether the study is enabled or not."""

    @abstractmethod
    def check(self) -> None:
        """Raise :class:`ConfigError` (message ``config key <key>: ...``) on a config the
        study cannot run: before any job, when Snakemake parses the workflow."""

    @classmethod
    def code(cls, part: str) -> list[str]:
        """Source files that decide ``part``'s outputs (the rule's ``code`` input): the part's
        :attr:`code_modules` and every package module they import
        (:func:`memtrials.pipeline.codesets.source_files`), less the plumbing in
        :data:`NOT_CODE`, with ``entry.py`` for the :attr:`entry_parts`."""
        from memtrials.pipeline.codesets import repo_path, source_files

        if part not in cls.parts:
            raise ValueError(f"{cls.name}: unknown part {part!r}; known: {', '.join(cls.parts)}")
        files = source_files([f"{cls.package}.{m}" for m in cls.code_modules[part]], exclude=NOT_CODE)
        if part in cls.entry_parts:
            return sorted({repo_path(f"{cls.package}.entry"), *files})
        return files

    def in_flight(self) -> int | None:
        """The study's own cap on a cell's concurrent requests (``None``: the endpoint's only)."""
        return None

    def api(self, model: str) -> int:
        """The ``api`` resource of a cell of ``model``: its endpoint's ``max_concurrency``,
        capped by :meth:`in_flight`, at least 1."""
        cap = int(self.models_registry[model].max_concurrency)
        own = self.in_flight()
        return max(1, cap if own is None else min(own, cap))

    # -- the scorecard (memtrials.pipeline.scorecard) ---------------------------------------
    headline_quantities: ClassVar[tuple[str, ...]] = ()
    """The names of the study's headline quantities, in the scorecard's order (none: no headline)."""
    headline_module: ClassVar[str] = "headline"
    """The module of :attr:`package` whose ``headline(model, inputs, options)`` returns the
    study's :class:`memtrials.report.scorecard.Headline` rows for endpoint ``model`` from the
    files :meth:`headline_inputs` named and the settings :meth:`headline_options` gave (run in
    the scorecard job; it may load pandas and SciPy)."""

    def headline_gap(self, model: str) -> str | None:
        """Why this config gives no headline for endpoint ``model`` (``model`` not in the study's
        design, an arm left out), with the key that would add it; None when it gives one."""
        return None

    def headline_inputs(self, model: str) -> dict[str, list[str]]:
        """The files the headline of endpoint ``model`` reads, by name (the scorecard rule's inputs);
        asked only when :meth:`headline_gap` is None."""
        return {}

    def headline_options(self) -> dict[str, Any]:
        """Settings of the study's config the headline needs (plain data; e.g. resamples)."""
        return {}

    def headline_plan(self, model: str) -> dict[str, Any]:
        """What the scorecard rule passes on for this study and endpoint ``model`` (plain data):
        the quantities, why they are not run (None when they are), the function that computes
        them (``"module:headline"``), its inputs and options."""
        if not self.headline_quantities:
            why: str | None = "the study declares no headline quantity"
        elif not self.enabled:
            why = f"{self.name}.enabled is false; set it true to run the study"
        else:
            why = self.headline_gap(model)
        return {"study": self.name, "quantities": list(self.headline_quantities), "why": why,
                "function": None if why else f"{self.package}.{self.headline_module}:headline",
                "inputs": {} if why else self.headline_inputs(model),
                "options": {} if why else self.headline_options()}

    @classmethod
    def headline_code(cls) -> list[str]:
        """Source files that decide the headline's rows (the scorecard rule's ``code`` input):
        :attr:`headline_module` and every package module it imports, less :data:`NOT_CODE`."""
        from memtrials.pipeline.codesets import source_files

        return source_files([f"{cls.package}.{cls.headline_module}", "memtrials.pipeline.scorecard"], exclude=NOT_CODE)

    def record_files(self) -> list[str]:
        """Every model-call records file (``*.calls.parquet``) the study's jobs write under this
        config (none when disabled): the scorecard's cost reads them."""
        return []

    def planted_entry(self, key: str, name: str, build: Callable[[dict[str, Any], str], Any]) -> Any | None:
        """The planted registry entry ``name`` that config key ``key`` (``<study>.known_answer...``)
        names, its params checked by ``build(params, where)`` (a ValueError becomes a ConfigError);
        None, with a warning naming the fix, where the registry lacks it (a user's own, a test's:
        the known-answer run is left out); an entry that is not planted is a ConfigError."""
        import logging

        from memtrials.config import ConfigError

        src, section = self.config["models_file"], key.split(".")[0]
        ep = self.models_registry.get(name)
        if ep is None:
            logging.getLogger(__name__).warning(
                "%s '%s' is not in %s: the known-answer run is left out (copy the planted-* entries of "
                "config/models.yaml there, or set %s.known_answer.enabled: false)", key, name, src, section)
            return None
        if getattr(ep, "planted", None) is None:
            raise ConfigError(f"config key {key}: '{name}' is not a planted entry (provider: planted) of {src}; "
                              f"name one, or set {section}.known_answer.enabled: false")
        try:
            build(dict(ep.planted.params), f"{src}: {name}.planted.params")
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        return ep

    def known_answer_endpoints(self, ka: Mapping[str, Any]) -> bool:
        """``<study>.known_answer`` (issue 38): whether its ``model`` (a planted chat endpoint, whose declared
        params are the truth) and ``embedder`` (an embedding endpoint) are in the registry.  A registry
        without them (a user's own, a test's) leaves the known-answer run out, with a warning naming the
        fix; an endpoint of the wrong kind is a ConfigError naming the key."""
        import logging

        from memtrials.config import ConfigError

        src = f"config key {self.name}.known_answer"
        missing = [ka[k] for k in ("model", "embedder") if ka[k] not in self.models_registry]
        if missing:
            logging.getLogger(__name__).warning(
                "%s: endpoint(s) %s not in the registry %s: the known-answer run is left out (copy the planted-* "
                "entries of config/models.yaml there, or set %s.known_answer.enabled: false)", src, missing,
                self.config.get("models_file"), self.name)
            return False
        for key, task in (("model", "chat"), ("embedder", "embed")):
            if self.models_registry[ka[key]].task != task:
                raise ConfigError(f"{src}.{key}: endpoint {ka[key]!r} is a {self.models_registry[ka[key]].task} "
                                  f"endpoint; name a {task} one")
        if self.models_registry[ka["model"]].planted is None:
            raise ConfigError(f"{src}.model: endpoint {ka['model']!r} is not a planted endpoint (provider planted), "
                              "whose declared params give the truth; name one (config/models.yaml: planted-*)")
        return True

    def workload(self) -> list[Any]:
        """What the study's design asks of its endpoints (:class:`memtrials.pipeline.workload.Work`
        rows: per part and endpoint its jobs, episodes and the calls at the step caps), counted
        before any call for ``python -m memtrials estimate``; none when disabled."""
        return []

    def design_figures(self, measured: Mapping[str, Any]) -> dict[str, Any]:
        """Per-call figures (:class:`memtrials.pipeline.workload.Profile`, by ``<study>/<part>/<purpose>``)
        of the purposes of :meth:`workload` that the ``measured`` table lacks, from the design: the
        caps it fixes, its prompts and the measured figures of a like purpose; each says how in its
        ``basis`` (default: none)."""
        return {}

    def profile_key(self, cell_id: str, purpose: str) -> tuple[str, str]:
        """(part, purpose) of a call record of one of the study's cells, as its :meth:`workload`
        names them (default: the cell id's second segment and the record's purpose)."""
        parts = cell_id.split("/")
        return (parts[1] if len(parts) > 1 else ""), purpose

    @abstractmethod
    def final_targets(self) -> list[str]:
        """What the target rule ``all`` asks of this study (none when it is disabled)."""
