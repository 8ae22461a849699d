"""What every rule's script shares when it enters Python: logging to the console and the
rule's log, and a clean stop (a precise message, no deep traceback) on the errors a user
can fix.

(Named for what it is, the entry of a Snakemake rule into the package; it was
``hindsight/cells.py``, a word that also meant a study's design cell and a history rule's
entry points.)
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path
from typing import Any, Awaitable, Callable, TypeVar

from hindsight.config import ConfigError
from hindsight.llm.types import LLMError

T = TypeVar("T")


def setup_logging(log_path: str | os.PathLike[str] | None, level: int = logging.INFO) -> None:
    """Log to stderr (the console) and, if given, to the rule's log file."""
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stderr)]
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_path, mode="w", encoding="utf-8"))
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s",
                        handlers=handlers, force=True)
    for noisy in ("httpx", "httpx2", "openai", "httpcore"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def run_cell(main: Callable[[], Awaitable[T]] | Callable[[], T], log_path: Any = None) -> T:
    """Run a rule's main (sync or async); on a user-fixable error, log it and exit 1."""
    setup_logging(log_path)
    log = logging.getLogger("hindsight.rule")
    try:
        result = main()
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        return result  # type: ignore[return-value]
    except (ConfigError, LLMError) as exc:
        log.error("%s", exc)
        sys.exit(1)
