"""The one prompt loader: a study's prompt files read exactly as written, with digests.

Prompt files are protocol (``config/prompts/<study>/``, sources in ``SOURCES.md``):
a study names the files it needs and gets their exact text, a SHA-256 per file, and one
version digest of all of them that goes into every cell's params and spec, so a change
to a prompt reruns what it feeds and shows in the result files' specs.

A study subclasses :class:`PromptFiles` with ``NAMES`` and ``WHAT`` (the study, which is
also the config section holding ``prompts_dir``) and adds its rendering methods.

A prompt file that resolves (through a symlink) outside the repository and outside its
folder is refused, since its text would be sent to the endpoints while the freeze holds
only digests, unless ``prompts.allow_outside`` is true (the workflow exports it to the
jobs: :func:`hindsight.config.check_prompts`).  Where each file resolved to is kept in
``resolved``, so a freeze can record it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Mapping, Sequence, TypeVar

from hindsight.config import REPO_ROOT, ConfigError, allow_outside_prompts, is_within

__all__ = ["MissingPromptFiles", "PromptFiles", "PromptOutside", "sha256_text"]

P = TypeVar("P", bound="PromptFiles")


class MissingPromptFiles(ConfigError, FileNotFoundError):
    """A prompt folder lacks files a study needs (a config problem: ``<study>.prompts_dir``)."""


class PromptOutside(ConfigError):
    """A prompt file resolves outside the repository and its folder (``prompts.allow_outside``)."""


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
    """The study (and config section) a subclass belongs to."""

    @classmethod
    def load(cls: type[P], directory: str | Path, names: Sequence[str] | None = None, *,
             what: str | None = None, allow_outside: bool | None = None) -> P:
        """Read ``names`` (default ``cls.NAMES``) from ``directory``.

        Raises :class:`MissingPromptFiles` naming the folder, every missing file and the
        config key to fix (``<what>.prompts_dir``), and :class:`PromptOutside` for a file
        that resolves outside the repository and outside ``directory``, unless
        ``allow_outside`` (default: ``prompts.allow_outside`` as the workflow exported it).
        """
        names = tuple(cls.NAMES if names is None else names)
        what = what or cls.WHAT or "study"
        if not names:
            raise ValueError(f"{cls.__name__}.load: no prompt file names given")
        d = Path(directory)
        missing = [f for f in names if not (d / f).is_file()]
        if missing:
            where = f"{d}" if d.is_dir() else f"{d} (no such folder)"
            raise MissingPromptFiles(
                f"{where}: missing {what} prompt file(s) {missing}; restore them from git "
                f"(config/prompts/{what}/) or fix {what}.prompts_dir in the config to name a "
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

    def digests(self) -> dict[str, str]:
        """SHA-256 of every file's text (UTF-8), by file name in sorted order."""
        return {f: sha256_text(t) for f, t in sorted(self.texts.items())}

    def version(self) -> str:
        """One digest of all files (16 hex digits)."""
        return hashlib.sha256(repr(sorted(self.digests().items())).encode()).hexdigest()[:16]
