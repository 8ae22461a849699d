"""Old path of :mod:`hindsight.rule_entry` (and the writers of :mod:`hindsight.files`), kept
only until the luck study's and the runner's files switch; new code imports those."""

from hindsight.files import write_parquet  # noqa: F401
from hindsight.rule_entry import run_cell, setup_logging  # noqa: F401


def write_text(text: str, path: str) -> None:
    """``hindsight.files.atomic_write_text(path, text)`` (argument order of the old helper)."""
    from hindsight.files import atomic_write_text

    atomic_write_text(path, text)
