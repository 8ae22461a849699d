"""The study interface: what a study's rules file asks of the config, written once (:class:`Study`).

A study is one subpackage of :mod:`memtrials.studies` with one rules file; the registry
(:mod:`memtrials.studies`) lists the studies, and both the workflow (``workflow/rules/
common.smk``: ``study(name)``) and ``python -m memtrials config check`` build every
registered study through it.  This module names no study.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Iterable, Mapping

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

    def workload(self) -> list[Any]:
        """What the study's design asks of its endpoints (:class:`memtrials.pipeline.workload.Work`
        rows: per part and endpoint its jobs, episodes and the calls at the step caps), counted
        before any call for ``python -m memtrials estimate``; none when disabled."""
        return []

    def profile_key(self, cell_id: str, purpose: str) -> tuple[str, str]:
        """(part, purpose) of a call record of one of the study's cells, as its :meth:`workload`
        names them (default: the cell id's second segment and the record's purpose)."""
        parts = cell_id.split("/")
        return (parts[1] if len(parts) > 1 else ""), purpose

    @abstractmethod
    def final_targets(self) -> list[str]:
        """What the target rule ``all`` asks of this study (none when it is disabled)."""
