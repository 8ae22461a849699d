"""The one prompt loader: a study's prompt files read exactly as written, with digests.

Prompt files are protocol (``config/prompts/<study>/``, sources in ``SOURCES.md``):
a study names the files it needs and gets their exact text, a SHA-256 per file, and one
version digest of all of them that goes into every cell's params and spec, so a change
to a prompt reruns what it feeds and shows in the result files' specs.

A study subclasses :class:`PromptFiles` with ``NAMES`` and ``WHAT`` (the study, which is
also the config section holding ``prompts_dir``) and adds its rendering methods.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Mapping, Sequence, TypeVar

from hindsight.config import ConfigError

__all__ = ["MissingPromptFiles", "PromptFiles", "sha256_text"]

P = TypeVar("P", bound="PromptFiles")


class MissingPromptFiles(ConfigError, FileNotFoundError):
    """A prompt folder lacks files a study needs (a config problem: ``<study>.prompts_dir``)."""


def sha256_text(text: str) -> str:
    """SHA-256 (hex) of a text's UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class PromptFiles:
    """Loaded prompt files: ``directory`` and ``texts`` (file name -> exact content)."""

    directory: str
    texts: Mapping[str, str]

    NAMES: ClassVar[Sequence[str]] = ()
    """The files a subclass needs (default for :meth:`load`)."""
    WHAT: ClassVar[str] = ""
    """The study (and config section) a subclass belongs to."""

    @classmethod
    def load(cls: type[P], directory: str | Path, names: Sequence[str] | None = None, *,
             what: str | None = None) -> P:
        """Read ``names`` (default ``cls.NAMES``) from ``directory``.

        Raises :class:`MissingPromptFiles` naming the folder, every missing file and the
        config key to fix (``<what>.prompts_dir``).
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
        return cls(str(d), {f: (d / f).read_text(encoding="utf-8") for f in names})

    def digests(self) -> dict[str, str]:
        """SHA-256 of every file's text (UTF-8), by file name in sorted order."""
        return {f: sha256_text(t) for f, t in sorted(self.texts.items())}

    def version(self) -> str:
        """One digest of all files (16 hex digits)."""
        return hashlib.sha256(repr(sorted(self.digests().items())).encode()).hexdigest()[:16]
