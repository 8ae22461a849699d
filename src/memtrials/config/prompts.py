"""The one prompt loader: prompt files read exactly as written, with digests.

Prompt files are protocol (``config/prompts/<owner>/``, sources in ``SOURCES.md``): the
owner is a study (its own folder, named by ``<study>.prompts_dir``) or a layer every study
shares (:data:`SHARED_FOLDERS`: the agent layer's ``actor/`` and the memories' ``memory/``,
which each study names under its own ``<study>.actor_prompts_dir`` / ``memory_prompts_dir``).
Code names the files it needs and gets their exact text, a SHA-256 per file, and one
version digest of all of them that goes into every cell's params and spec, so a change
to a prompt reruns what it feeds and shows in the result files' specs.

An owner subclasses :class:`PromptFiles` with ``NAMES`` and ``WHAT`` (the owner: the
folder's name under ``config/prompts/``) and adds its rendering methods.

A prompt file that resolves (through a symlink) outside the repository and outside its
folder is refused, since its text would be sent to the endpoints while the freeze holds
only digests, unless ``prompts.allow_outside`` is true (the workflow exports it to the
jobs: :func:`check_prompts`, which the workflow calls before any job, also checking that
every enabled study's ``prompts_dir`` exists).  Where each file resolved to is kept in
``resolved``, so a freeze can record it.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence, TypeVar

from memtrials.config.errors import REPO_ROOT, ConfigError
from memtrials.config.sources import Sources, key_source

__all__ = ["MissingPromptFiles", "PROMPTS_ALLOW_ENV", "PromptFiles", "PromptOutside", "SHARED_FOLDERS", "check_prompts",
           "folder_key", "prompt_dirs", "sha256_text"]

P = TypeVar("P", bound="PromptFiles")


class MissingPromptFiles(ConfigError, FileNotFoundError):
    """A prompt folder lacks files its code needs (a config problem: the key naming the folder)."""


class PromptOutside(ConfigError):
    """A prompt file resolves outside the repository and its folder (``prompts.allow_outside``)."""


SHARED_FOLDERS: tuple[str, ...] = ("actor", "memory")
"""Prompt folders of the layers below the studies (``config/prompts/actor/``,
``config/prompts/memory/``): each study that uses one names it under its own key,
``<study>.<owner>_prompts_dir``.  Every other folder is a study's own, ``<study>.prompts_dir``."""


def folder_key(what: str) -> str:
    """The config key that names a folder of ``what``'s prompt files: ``<study>.<what>_prompts_dir``
    for a shared folder (whichever study uses it), else the study's ``<what>.prompts_dir``."""
    return f"<study>.{what}_prompts_dir" if what in SHARED_FOLDERS else f"{what}.prompts_dir"


def key_owner(key: str) -> str:
    """Whose folder a ``prompts_dir`` key names (the inverse of :func:`folder_key`):
    ``playbook.actor_prompts_dir`` -> ``actor``, ``luck.prompts_dir`` -> ``luck``."""
    owner = key.rsplit(".", 1)[-1].removesuffix("prompts_dir").removesuffix("_")
    return owner if owner in SHARED_FOLDERS else key.split(".")[0]


def sha256_text(text: str) -> str:
    """SHA-256 (hex) of a text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PromptFiles:
    """Loaded prompt files: ``directory``, ``texts`` (file name -> exact content) and
    ``resolved`` (file name -> the absolute path it was read from, symlinks followed)."""

    directory: str
    texts: Mapping[str, str]
    resolved: Mapping[str, str] = field(default_factory=dict, compare=False)

    NAMES: ClassVar[Sequence[str]] = ()
    """The files a subclass needs (default for :meth:`load`)."""
    WHAT: ClassVar[str] = ""
    """Whose files these are: a study, or a shared layer (:data:`SHARED_FOLDERS`); the name of
    their shipped folder under ``config/prompts/``."""

    @classmethod
    def load(cls: type[P], directory: str | Path, names: Sequence[str] | None = None, *,
             what: str | None = None, key: str | None = None, allow_outside: bool | None = None) -> P:
        """Read ``names`` (default ``cls.NAMES``) from ``directory``.

        Raises :class:`MissingPromptFiles` naming the folder, every missing file, the shipped
        folder (``config/prompts/<what>/``) and the config key to fix (``key``, default
        :func:`folder_key` of ``what``), and :class:`PromptOutside` for a file that resolves
        outside the repository and outside ``directory``, unless ``allow_outside`` (default:
        ``prompts.allow_outside`` as the workflow exported it).
        """
        names = tuple(cls.NAMES if names is None else names)
        what = what or cls.WHAT or "study"
        key = key or folder_key(what)
        if not names:
            raise ValueError(f"{cls.__name__}.load: no prompt file names given")
        d = Path(directory)
        missing = [f for f in names if not (d / f).is_file()]
        if missing:
            where = f"{d}" if d.is_dir() else f"{d} (no such folder)"
            raise MissingPromptFiles(
                f"{where}: missing {what} prompt file(s) {missing}; restore them from git "
                f"(config/prompts/{what}/) or fix {key} in the config to name a "
                f"folder that holds all of {list(names)}"
            )
        resolved = {f: (d / f).resolve() for f in names}
        if not (allow_outside_prompts() if allow_outside is None else allow_outside):
            home = d.resolve()
            outside = {f: str(r) for f, r in resolved.items() if not (is_within(r, home) or is_within(r, REPO_ROOT))}
            if outside:
                raise PromptOutside(
                    f"{d}: {what} prompt file(s) resolve outside the repository ({REPO_ROOT}) and outside this "
                    f"folder: {outside}; their text would be sent to the endpoints. Fix: copy the files into {d} "
                    f"(and name their source), or set prompts.allow_outside: true in the config to allow it.")
        return cls(str(d), {f: resolved[f].read_text(encoding="utf-8") for f in names},
                   {f: str(r) for f, r in resolved.items()})

    def t(self, name: str) -> str:
        """A file's text without its trailing line breaks (what the renderers fill)."""
        return self.texts[name].rstrip("\n")

    def digests(self) -> dict[str, str]:
        """SHA-256 of every file's text (UTF-8), by file name in sorted order."""
        return {f: sha256_text(t) for f, t in sorted(self.texts.items())}

    def version(self) -> str:
        """One digest of all files (16 hex digits)."""
        return hashlib.sha256(repr(sorted(self.digests().items())).encode()).hexdigest()[:16]



# -- prompt folders, checked before any job ------------------------------------------------------------------
PROMPTS_ALLOW_ENV = "MEMTRIALS_PROMPTS_ALLOW_OUTSIDE"
"""Set by :func:`check_prompts` (in the Snakemake process) from ``prompts.allow_outside``, so
every job's :meth:`memtrials.config.prompts.PromptFiles.load` applies the same rule (jobs inherit
the environment, as they do the run id)."""


def allow_outside_prompts() -> bool:
    """Whether prompt files may resolve outside the repository and their folder (``prompts.allow_outside``)."""
    return os.environ.get(PROMPTS_ALLOW_ENV, "0") == "1"


def is_within(path: Path, folder: Path) -> bool:
    """``path`` (resolved) lies inside ``folder`` (resolved)."""
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def prompt_dirs(config: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Every ``prompts_dir`` key (and ``actor_prompts_dir`` / ``memory_prompts_dir``, the shared
    folders a study uses: any key ending in ``prompts_dir``; dotted) and value in the sections of
    ``config`` that are not disabled (``enabled: false`` skips a section and everything under it)."""
    found: list[tuple[str, str]] = []
    for key, value in config.items():
        if not isinstance(value, Mapping) or value.get("enabled", True) is False:
            if key.endswith("prompts_dir") and isinstance(value, str):
                found.append((f"{prefix}{key}", value))
            continue
        found.extend(prompt_dirs(value, f"{prefix}{key}."))
    return found


def check_prompts(config: Mapping[str, Any], source: str | Sources = "config/config.yaml") -> None:
    """Before any job: every enabled study's ``prompts_dir`` (and shared folder key) is a folder, and none of its files
    resolves (through a symlink) outside the repository and outside that folder unless
    ``prompts.allow_outside`` is true, and an edited folder's files ask for no field their study
    does not fill (:func:`check_placeholders`).  Exports the rule for the jobs (:data:`PROMPTS_ALLOW_ENV`)."""
    allow = bool((config.get("prompts") or {}).get("allow_outside", False))
    for key, value in prompt_dirs(config):
        folder = Path(value)
        shipped = _default_folder(key)
        home_dir = (f"{shipped.relative_to(REPO_ROOT)}" if shipped is not None and is_within(shipped, REPO_ROOT)
                    else f"config/prompts/{key_owner(key)}")
        at = key_source(source, key)  # the file that set the key
        if not folder.exists():
            raise ConfigError(
                f"{at}: key {key}: folder '{value}' does not exist (looked in {Path.cwd()}). Fix: restore it "
                f"from git ({home_dir}/) or set {key} to the folder that holds those prompt files.")
        if not folder.is_dir():
            raise ConfigError(f"{at}: key {key}: '{value}' is a file, not a folder. Fix: set {key} to the folder "
                              f"that holds those prompt files (e.g. {home_dir}).")
        check_placeholders(folder, key, at)
        if allow:
            continue
        home = folder.resolve()
        for entry in sorted(folder.iterdir()):
            target = entry.resolve()
            if entry.is_symlink() and not target.exists():
                raise ConfigError(f"{at}: key {key}: prompt file {entry} is a symlink to {target}, which does "
                                  f"not exist. Fix: replace the link by the file itself.")
            if not (is_within(target, home) or is_within(target, REPO_ROOT)):
                raise ConfigError(
                    f"{at}: key {key}: prompt file {entry} resolves to {target}, outside the repository "
                    f"({REPO_ROOT}) and outside {value}; its text would be sent to the endpoints. Fix: copy the file "
                    f"into {value} (and name its source), or set prompts.allow_outside: true to allow it.")
    os.environ[PROMPTS_ALLOW_ENV] = "1" if allow else "0"


# a template field: ``{name}`` (``fill``) or ``{name:spec}`` / ``{name!r}`` (``str.format``), not ``{{name}}``
_PLACEHOLDER = re.compile(r"(?<!\{)\{([A-Za-z_]\w*)(?:[:!][^{}]*)?\}(?!\})")


def placeholders(text: str) -> set[str]:
    """The field names a prompt template asks its study to fill."""
    return set(_PLACEHOLDER.findall(text))


@functools.cache
def _shipped_config() -> Any:
    """The repository's config/config.yaml, parsed once a process (every Snakemake parse checks
    the prompt folders, and each key asks for its shipped folder)."""
    import yaml

    return yaml.safe_load((REPO_ROOT / "config" / "config.yaml").read_text())


def _default_folder(key: str) -> Path | None:
    """The shipped folder of a ``prompts_dir`` key (its value in the repository's config/config.yaml)."""
    node: Any = _shipped_config()
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return REPO_ROOT / node if isinstance(node, str) else None


def check_placeholders(folder: Path, key: str, at: str) -> None:
    """A prompt file of an edited folder asks only for the fields its study fills: those of the
    shipped file of the same name.  A misspelt ``{histroy}`` would otherwise stop the first job
    that renders it, after other cells had spent their calls."""
    shipped = _default_folder(key)
    if shipped is None or not shipped.is_dir() or shipped.resolve() == folder.resolve():
        return
    for entry in sorted(folder.iterdir()):
        original = shipped / entry.name
        if not (entry.is_file() and original.is_file()):
            continue
        try:
            known = placeholders(original.read_text(encoding="utf-8"))
            unknown = placeholders(entry.read_text(encoding="utf-8")) - known
        except UnicodeDecodeError:
            continue
        if unknown:
            raise ConfigError(
                f"{at}: key {key}: prompt file {entry} asks for {', '.join('{' + u + '}' for u in sorted(unknown))}, "
                f"which the study does not fill (its {original.relative_to(REPO_ROOT)} uses "
                f"{', '.join('{' + k + '}' for k in sorted(known)) or 'no fields'}). Fix: correct the name, or write "
                f"literal braces as {{{{ and }}}} where the file is used with str.format.")
