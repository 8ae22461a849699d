"""The config package's error type, and the repository root its shipped files are read from.

Every check of the package raises :class:`ConfigError`, whose message names the file,
the key and the fix; ``REPO_ROOT`` is the checkout (``config/schemas/``, the shipped
``config/config.yaml``, a relative ``models_file`` that is not found from the working folder).
"""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


class ConfigError(ValueError):
    """A configuration problem, stated with its file, key and fix."""
