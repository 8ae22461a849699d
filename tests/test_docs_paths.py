"""The docs speak of the code as it is: every module, name and file they cite in backticks exists.

Read from README.md, config/README.md, docs/*.md, the prompt folders' SOURCES.md and the report
captions' README: a dotted name ``memtrials.x.y`` must import (or be an attribute of what
imports), and a path (``src/memtrials/...``, ``docs/...``, ``config/...``, or one inside the
package such as ``agent/runner.py``) must exist in the repository or in ``src/memtrials/``.
A page that names a moved module fails here instead of misleading a reader.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "src" / "memtrials"
PAGES = [REPO / "README.md", REPO / "config" / "README.md", *sorted((REPO / "docs").glob("*.md")),
         *sorted((REPO / "config" / "prompts").rglob("SOURCES.md")), REPO / "workflow" / "report" / "README.md"]
DOTTED = re.compile(r"`(memtrials(?:\.\w+)+)")
ROOTS = ("src", "config", "docs", "workflow", "tests", "benchmarks", "bin", "envs", "profiles", "examples",
         "agent", "memory", "llm", "studies", "stats", "curation", "pipeline", "report", "testing")
PATH = re.compile(r"`((?:%s)/[\w./-]+)`" % "|".join(ROOTS))
# the worked example of docs/architecture.md adds a study that does not exist
HYPOTHETICAL = ("recall",)


def _exists_dotted(name: str) -> bool:
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _exists_path(path: str) -> bool:
    path = path.rstrip(".,")
    return (REPO / path).exists() or (PACKAGE / path).exists()


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_cited_module_and_path_exists(page):
    text = page.read_text(encoding="utf-8")
    bad = [m.group(1) for m in DOTTED.finditer(text) if not _exists_dotted(m.group(1))]
    bad += [m.group(1) for m in PATH.finditer(text)
            if not _exists_path(m.group(1)) and not any(h in m.group(1) for h in HYPOTHETICAL)]
    assert not bad, f"{page.relative_to(REPO)} cites what does not exist: {sorted(set(bad))}"


def test_the_check_finds_a_moved_module():
    assert _exists_dotted("memtrials.llm.cache.keys.cache_key")
    assert not _exists_dotted("memtrials.llm.tokenize")
    assert _exists_path("agent/runner.py") and not _exists_path("llm/tokenize.py")
